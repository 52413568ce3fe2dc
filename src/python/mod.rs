//! python
