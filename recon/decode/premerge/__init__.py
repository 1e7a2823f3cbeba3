"""The merge's pre-work, done in the decode tasks while the events are at hand: each task's
winners (the pre-fold) and its classes of the values the merge checks."""
