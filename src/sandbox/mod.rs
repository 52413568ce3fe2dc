//! sandbox (built on branch sandbox)
