"""Prior (KL) terms of the neighbour-driven GPVAE engines."""
