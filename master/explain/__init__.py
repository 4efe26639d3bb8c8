"""Why a culprit is slower, from more than instructions: the exact counters that changed (master/explain/counters)."""
