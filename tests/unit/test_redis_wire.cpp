// Redis wire helpers (written next).
