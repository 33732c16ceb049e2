"""One file per backend; each module exposes `BACKEND`."""
