"""Reading runs without changing them: runs, timelines and snapshots, the boundary a
continue names, diffs between runs, and a run's event stream."""
