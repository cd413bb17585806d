// Reads the console's server-sent events with fetch(), which (unlike EventSource) can send the
// admin key as an Authorization header, so that the key never goes into a URL.

export class AuthError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

function headers(key) {
  const h = { Accept: 'text/event-stream' };
  if (key) h.Authorization = 'Bearer ' + key;
  return h;
}

async function refusal(resp) {
  let msg = resp.status + ' ' + resp.statusText;
  try { const j = await resp.json(); if (j && j.error && j.error.message) msg = j.error.message; } catch (_) { /* not JSON */ }
  return msg;
}

// snapshot fetches the whole state (/ui/api/snapshot), parsed; it rejects with an AuthError for
// 401 and 403.
export async function snapshot(key, signal) {
  const h = key ? { Authorization: 'Bearer ' + key } : {};
  const resp = await fetch('/ui/api/snapshot', { headers: h, cache: 'no-store', credentials: 'omit', signal });
  if (resp.status === 401 || resp.status === 403) throw new AuthError(resp.status, await refusal(resp));
  if (!resp.ok) throw new Error(await refusal(resp));
  return resp.json();
}

// stream opens /ui/api/events and calls onEvent(name, data) for each event until the stream
// ends (it resolves) or fails (it rejects; an AuthError for 401 and 403). since is the version
// the page holds (0: none): the stream then starts with the whole state only if it moved on.
export async function stream(key, since, onEvent, signal) {
  const url = '/ui/api/events' + (since ? '?since=' + since : '');
  const resp = await fetch(url, { headers: headers(key), cache: 'no-store', credentials: 'omit', signal });
  if (resp.status === 401 || resp.status === 403) throw new AuthError(resp.status, await refusal(resp));
  if (!resp.ok) throw new Error(await refusal(resp));
  const reader = resp.body.getReader();
  const dec = new TextDecoder();
  let buf = '', from = 0;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += dec.decode(value, { stream: true });
    let cut;
    // from: where the search for the end of an event resumes, so that a big event arriving in
    // many chunks is scanned once.
    while ((cut = buf.indexOf('\n\n', from)) >= 0) {
      const block = buf.slice(0, cut);
      buf = buf.slice(cut + 2);
      from = 0;
      let name = 'message';
      const data = [];
      for (const line of block.split('\n')) {
        if (line.startsWith(':')) continue; // a heartbeat
        if (line.startsWith('event: ')) name = line.slice(7);
        else if (line.startsWith('data: ')) data.push(line.slice(6));
      }
      if (data.length) onEvent(name, data.join('\n'));
    }
    from = Math.max(0, buf.length - 1);
  }
}
