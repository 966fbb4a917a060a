package state

// Applied returns the last stream sequence the view reflects. It is the
// Checkpoint, or later when events after it changed nothing and their
// records wait in memory for the next commit (see Apply): readers already
// see those records, so a comparison with a replay must replay up to here.
func (d *DB) Applied() uint64 {
	d.pmu.RLock()
	defer d.pmu.RUnlock()
	return d.seq
}
