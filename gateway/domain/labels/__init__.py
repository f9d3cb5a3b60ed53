"""A concept's labels: the label set people fill one note at a time, the queue that picks the next notes, and
the retraining that turns them into a probe with an estimate of how good it already is."""
