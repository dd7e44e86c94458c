"""Sessions: lifecycle (new, load, resume, fork, close), the typed event stream a
face subscribes to, and the journal. Does not know which protocol is speaking."""
