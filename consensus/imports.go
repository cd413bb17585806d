package consensus

// SaveImports keeps imported workers' state beside raft's log (storage.Store.SaveImports); a
// no-op when ephemeral.
func (n *Node) SaveImports(put map[string][]byte, del []string) error {
	if n.stores.db == nil {
		return nil
	}
	return n.stores.db.SaveImports(put, del)
}

// LoadImports reads what SaveImports kept; nothing when ephemeral.
func (n *Node) LoadImports(each func(id string, v []byte) error) error {
	if n.stores.db == nil {
		return nil
	}
	return n.stores.db.LoadImports(each)
}
