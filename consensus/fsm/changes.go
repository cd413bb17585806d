package fsm

import "github.com/meshgw/meshgw/worker"

// changeLogTombstones is how many removed ids the change log keeps. A reader from before the
// removal of an id it dropped (more removals than this since the reader's version) gets
// ok=false from ChangedSince and reads every record instead. Ids that have a record are never
// dropped.
const changeLogTombstones = 4096

// change is the latest change of one record id: the version that made it, and whether the
// record was gone after it. It sits in one of the change log's two lists.
type change struct {
	version    uint64
	id         worker.ID
	removed    bool
	prev, next *change
}

// changeList is a doubly linked list of changes in version order, oldest at head.
type changeList struct {
	head, tail *change
	n          int
}

func (l *changeList) push(c *change) {
	c.prev, c.next = l.tail, nil
	if l.tail != nil {
		l.tail.next = c
	} else {
		l.head = c
	}
	l.tail = c
	l.n++
}

func (l *changeList) unlink(c *change) {
	if c.prev != nil {
		c.prev.next = c.next
	} else {
		l.head = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	} else {
		l.tail = c.prev
	}
	c.prev, c.next = nil, nil
	l.n--
}

// changeLog holds, for each record id changed since the last reset, its latest change, in two
// lists in version order: ids that have a record, and ids removed (at most
// changeLogTombstones). What changed after version v is the tail of each list down to v, so
// asking costs what changed since v, never what the state holds: a save or a reconcile pass
// after a burst of writes reads the burst, whatever the size of the fleet (a ring of the last
// changes, as before, overflowed under a burst, and every reader then read every record). It
// costs one entry (about 80 bytes) per record changed since the last reset. It is guarded by
// the FSM's lock, like the version it goes with.
type changeLog struct {
	byID          map[worker.ID]*change
	live, removed changeList
	// lost is the newest version of a dropped tombstone: the log cannot name every id changed
	// after a version older than it.
	lost uint64
	// reset is the version of the latest change the log cannot name (a restore, a cluster
	// init): a reader older than it must read every record.
	reset uint64
}

// add records that the change making version touched ids, workers being the records after it;
// no id means a change the log cannot name (a reset).
func (l *changeLog) add(version uint64, ids []worker.ID, workers map[worker.ID]*Record) {
	if len(ids) == 0 {
		// No reader at or after the reset needs an earlier entry; one before it reads all.
		*l = changeLog{reset: version, lost: l.lost}
		return
	}
	if l.byID == nil {
		l.byID = make(map[worker.ID]*change)
	}
	for _, id := range ids {
		c := l.byID[id]
		switch {
		case c == nil:
			c = &change{id: id}
			l.byID[id] = c
		case c.removed:
			l.removed.unlink(c)
		default:
			l.live.unlink(c)
		}
		_, exists := workers[id]
		c.version, c.removed = version, !exists
		if c.removed {
			l.removed.push(c)
		} else {
			l.live.push(c)
		}
	}
	for l.removed.n > changeLogTombstones {
		c := l.removed.head
		l.removed.unlink(c)
		delete(l.byID, c.id)
		l.lost = max(l.lost, c.version)
	}
}

// since returns the distinct ids changed after version v, up to now (the current version), or
// ok=false when the log cannot name them all.
func (l *changeLog) since(v, now uint64) (ids []worker.ID, ok bool) {
	if v > now || v < l.reset || v < l.lost {
		return nil, false
	}
	for _, list := range []*changeList{&l.live, &l.removed} {
		for c := list.tail; c != nil && c.version > v; c = c.prev {
			ids = append(ids, c.id)
		}
	}
	return ids, true
}

// Changes is what changed in the worker records after one version: each changed id once, as
// its record at Now or, when it has none any more, in Removed.
type Changes struct {
	// Now is the version the changes lead to: pass it to the next ChangedSince.
	Now uint64
	// Workers are the changed records that exist at Now, sharing the stored specs' maps and
	// slices like WorkersShared's. Read them; never modify them.
	Workers []Record
	// Removed are the changed ids that have no record at Now.
	Removed []worker.ID
}

// ChangedSince returns the records changed after version v (a Now of an earlier call, or 0 for
// the empty state), read with the version under one lock, so that they are the state at
// exactly Now. ok is false when the FSM cannot name every change since v: more than
// changeLogTombstones records were removed since v, a snapshot was restored or the cluster id
// set since v, or v is newer than Now; the reader must then read every record (WorkersShared), and Now is
// still the version to remember, provided it was read first. A change that changes nothing
// (Unchanged, Rejected, Ignored) appears nowhere.
func (f *FSM) ChangedSince(v uint64) (Changes, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	ch := Changes{Now: f.version.Load()}
	ids, ok := f.changes.since(v, ch.Now)
	if !ok {
		return ch, false
	}
	for _, id := range ids {
		if r, found := f.st.workers[id]; found {
			ch.Workers = append(ch.Workers, *r)
		} else {
			ch.Removed = append(ch.Removed, id)
		}
	}
	return ch, true
}
