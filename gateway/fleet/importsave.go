package fleet

import (
	"encoding/binary"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/meshgw/meshgw/gateway/pool"
	"github.com/meshgw/meshgw/mesh"
	"github.com/meshgw/meshgw/worker"
)

// DefaultImportSaveEvery is how often KeepImports writes what changed of the imported state.
const DefaultImportSaveEvery = 2 * time.Second

// ImportStore keeps imported state on disk; *consensus.Node implements it.
type ImportStore interface {
	SaveImports(put map[string][]byte, del []string) error
	LoadImports(each func(id string, v []byte) error) error
}

// savedImport is one saved entry: when the bulletin was received (unix nanoseconds, 8 bytes
// big-endian), then the bulletin's protobuf (mesh.MarshalBulletin).
func encodeImport(b *mesh.Bulletin, at int64) ([]byte, error) {
	raw, err := mesh.MarshalBulletin(b)
	if err != nil {
		return nil, err
	}
	return append(binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(raw)), uint64(at)), raw...), nil
}

func decodeImport(v []byte) (mesh.Bulletin, time.Time, error) {
	if len(v) < 8 {
		return mesh.Bulletin{}, time.Time{}, errors.New("a saved import shorter than its time")
	}
	b, err := mesh.UnmarshalBulletin(v[8:])
	return b, time.Unix(0, int64(binary.BigEndian.Uint64(v[:8]))), err
}

// takeDirty returns what changed since the last call, encoded for the store, and clears it;
// names lists "id=health" of the first few changed workers, for the debug line.
func (im *Importer) takeDirty() (put map[string][]byte, del, names []string) {
	im.mu.Lock()
	defer im.mu.Unlock()
	put = make(map[string][]byte, len(im.dirty))
	for id := range im.dirty {
		cur := im.state[id]
		if cur == nil {
			continue
		}
		b := cur.bulletin(id)
		if w := im.cfg.Pool.Get(id); w != nil {
			b.Models = w.DiscoveredModels()
		}
		if v, err := encodeImport(&b, cur.at); err == nil {
			put[string(id)] = v
			if len(names) < bulkLines {
				names = append(names, string(id)+"="+b.HealthText())
			}
		}
	}
	for id := range im.gone {
		del = append(del, string(id))
	}
	clear(im.dirty)
	clear(im.gone)
	return put, del, names
}

// markDirty puts back what a failed save did not write.
func (im *Importer) markDirty(put map[string][]byte, del []string) {
	im.mu.Lock()
	defer im.mu.Unlock()
	for id := range put {
		if _, ok := im.state[worker.ID(id)]; ok {
			im.dirty[worker.ID(id)] = struct{}{}
		}
	}
	for _, id := range del {
		if _, ok := im.state[worker.ID(id)]; !ok {
			im.gone[worker.ID(id)] = struct{}{}
		}
	}
}

// Restore applies the imported state saved before a restart, each entry as received when it
// first was, so that it is as stale as it is old: a gateway that restarts while the owners are
// down routes their workers by their last known state (fail-static) instead of leaving them
// unknown and unroutable until each owner is heard. Call it after the reconciler's first pass
// (the records are in the pool): an entry whose record is gone, owned here or at another epoch,
// or older than what was already heard, is dropped. It returns how many entries applied.
func (im *Importer) Restore(store ImportStore) (int, error) {
	type entry struct {
		b  mesh.Bulletin
		at time.Time
	}
	var saved []entry
	var bad int
	err := store.LoadImports(func(id string, v []byte) error {
		b, at, err := decodeImport(v)
		if err != nil || b.Worker != id {
			bad++
			return nil
		}
		saved = append(saved, entry{b, at})
		return nil
	})
	if err != nil {
		return 0, err
	}
	flush := im.cfg.Pool.Defer()
	defer flush()
	im.mu.Lock()
	defer im.mu.Unlock()
	applied := 0
	for i := range saved {
		b := &saved[i].b
		id := worker.ID(b.Worker)
		w := im.cfg.Pool.Get(id)
		if w == nil {
			im.gone[id] = struct{}{}
			continue
		}
		rec := Ref{Known: true}
		rec.Owner, rec.Epoch = w.OwnerEpoch()
		var last Ref
		cur := im.state[id]
		if cur != nil {
			last = Ref{Known: true, Owner: cur.owner, Epoch: cur.epoch, Seq: cur.seq}
		}
		if Judge(rec, last, im.cfg.NodeID, b) != Apply || w.Origin != pool.OriginMesh || worker.IsHostLocalURL(w.URL) {
			if cur == nil {
				im.gone[id] = struct{}{} // owned here or moved on: the next save deletes it
			}
			continue
		}
		im.applyLocked(w, cur, b, saved[i].at)
		delete(im.dirty, id) // it is on disk as it is
		applied++
	}
	if bad > 0 {
		im.log.Warn("skipped saved imported state that does not decode", "entries", bad)
	}
	return applied, nil
}

// KeepImports saves what changed of im's state to store every interval (<= 0 means
// DefaultImportSaveEvery), and once more when stopped. The returned function stops it.
func KeepImports(im *Importer, store ImportStore, every time.Duration, log *slog.Logger) (stop func()) {
	if every <= 0 {
		every = DefaultImportSaveEvery
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	save := func() {
		put, del, names := im.takeDirty()
		if len(put) == 0 && len(del) == 0 {
			return
		}
		if err := store.SaveImports(put, del); err != nil {
			im.markDirty(put, del)
			log.Warn("cannot save the imported workers' state; retrying", "err", err)
			return
		}
		log.Debug("saved imported state", "changed", len(put), "removed", len(del), "workers", names)
	}
	wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				save()
				return
			case <-t.C:
				save()
			}
		}
	})
	var once sync.Once
	return func() {
		once.Do(func() { close(done) })
		wg.Wait()
	}
}
