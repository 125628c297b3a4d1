"""Node side: what runs on each Ray node (py-spy dumps, /proc reads). Stdlib + py-spy only: shipped to nodes."""
