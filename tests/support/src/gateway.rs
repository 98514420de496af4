//! The `redis-rest` gateway as a real process (filled in with the gateway).
