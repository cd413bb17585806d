package fsm

import "github.com/meshgw/meshgw/worker"

// changeLogSize is how many (version, id) entries the change log keeps. A reader that falls
// further behind (or a change of as many records at once) gets ok=false from ChangedSince and
// reads every record instead.
const changeLogSize = 4096

// change is one entry of the change log: the record id changed by the state change that made
// the version.
type change struct {
	version uint64
	id      worker.ID
}

// changeLog is a ring of the ids the latest state changes touched, in version order. It is
// guarded by the FSM's lock, like the version it goes with.
type changeLog struct {
	entries [changeLogSize]change
	// n counts the entries ever added; the next one goes at n % changeLogSize.
	n uint64
	// lost is the newest version an overwritten entry belonged to: the log cannot name all the
	// ids changed after a version older than it.
	lost uint64
	// reset is the version of the latest change the log cannot name (a restore, a cluster
	// init): a reader older than it must read every record.
	reset uint64
}

// add records that the change making version touched ids; no id means a change the log cannot
// name.
func (l *changeLog) add(version uint64, ids []worker.ID) {
	if len(ids) == 0 {
		l.reset = version
		return
	}
	for _, id := range ids {
		slot := &l.entries[l.n%changeLogSize]
		if l.n >= changeLogSize {
			l.lost = slot.version
		}
		*slot = change{version: version, id: id}
		l.n++
	}
}

// since returns the distinct ids changed after version v, up to now (the current version), or
// ok=false when the log cannot name them all.
func (l *changeLog) since(v, now uint64) (ids []worker.ID, ok bool) {
	if v > now || v < l.reset || v < l.lost {
		return nil, false
	}
	seen := make(map[worker.ID]struct{})
	for i := l.n; i > 0 && l.n-i < changeLogSize; i-- {
		c := l.entries[(i-1)%changeLogSize]
		if c.version <= v {
			break
		}
		if _, dup := seen[c.id]; !dup {
			seen[c.id] = struct{}{}
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
// exactly Now. ok is false when the FSM cannot name every change since v: v is older than the
// last changeLogSize record changes, a snapshot was restored or the cluster id set since v, or
// v is newer than Now; the reader must then read every record (WorkersShared), and Now is
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
