// A virtualised list: only the rows in view (and a few around them) are in the DOM, so ten
// thousand workers scroll as smoothly as ten. Rows have one fixed height.

export class Grid {
  // el: the scroll container (role=grid); renderRow(item, div) fills a row; onActive(item) is
  // told the row the keyboard or a click chose.
  constructor(el, rowHeight, renderRow, onActive) {
    this.el = el; this.h = rowHeight; this.renderRow = renderRow; this.onActive = onActive;
    this.items = []; this.active = -1; this.pool = [];
    this.spacer = el.querySelector('.spacer');
    this.frame = 0;
    el.addEventListener('scroll', () => this.schedule());
    el.addEventListener('keydown', (e) => this.key(e));
    el.addEventListener('click', (e) => {
      const row = e.target.closest('.row');
      if (row) this.setActive(Number(row.dataset.index), false);
    });
    new ResizeObserver(() => this.schedule()).observe(el);
  }

  setItems(items) {
    const prev = this.active >= 0 ? this.items[this.active] : null;
    this.items = items;
    this.el.setAttribute('aria-rowcount', String(items.length));
    this.spacer.style.height = (items.length * this.h) + 'px';
    // Up to 18 rows tall: a short list takes no more room than it needs.
    this.el.style.height = (Math.max(3, Math.min(items.length, 18)) * this.h + 2) + 'px';
    if (prev) {
      const i = items.findIndex((it) => it.key === prev.key);
      this.active = i;
    }
    if (this.active >= items.length) this.active = items.length - 1;
    this.render();
    if (this.active >= 0) this.onActive(this.items[this.active]);
  }

  schedule() {
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => { this.frame = 0; this.render(); });
  }

  render() {
    const top = this.el.scrollTop, height = this.el.clientHeight || 400;
    const first = Math.max(0, Math.floor(top / this.h) - 5);
    const last = Math.min(this.items.length, Math.ceil((top + height) / this.h) + 5);
    const want = last - first;
    while (this.pool.length < want) {
      const d = document.createElement('div');
      d.className = 'row';
      d.setAttribute('role', 'row');
      this.el.appendChild(d);
      this.pool.push(d);
    }
    while (this.pool.length > want) this.pool.pop().remove();
    for (let i = 0; i < want; i++) {
      const idx = first + i, d = this.pool[i], item = this.items[idx];
      d.style.top = (idx * this.h) + 'px';
      d.dataset.index = String(idx);
      d.id = 'row-' + idx;
      d.setAttribute('aria-rowindex', String(idx + 1));
      this.renderRow(item, d);
      d.classList.toggle('active', idx === this.active);
      d.setAttribute('aria-selected', idx === this.active ? 'true' : 'false');
    }
    if (this.active >= first && this.active < last) this.el.setAttribute('aria-activedescendant', 'row-' + this.active);
    else this.el.removeAttribute('aria-activedescendant');
  }

  setActive(i, scroll) {
    if (!this.items.length) return;
    this.active = Math.max(0, Math.min(this.items.length - 1, i));
    if (scroll) {
      const y = this.active * this.h, top = this.el.scrollTop, height = this.el.clientHeight;
      if (y < top) this.el.scrollTop = y;
      else if (y + this.h > top + height) this.el.scrollTop = y + this.h - height;
    }
    this.render();
    this.onActive(this.items[this.active]);
  }

  key(e) {
    const page = Math.max(1, Math.floor(this.el.clientHeight / this.h) - 1);
    const moves = { ArrowDown: 1, ArrowUp: -1, PageDown: page, PageUp: -page };
    if (e.key in moves) this.setActive((this.active < 0 ? 0 : this.active + moves[e.key]), true);
    else if (e.key === 'Home') this.setActive(0, true);
    else if (e.key === 'End') this.setActive(this.items.length - 1, true);
    else return;
    e.preventDefault();
  }
}
