//! The idempotency journal: fxpay's own keys, since the service has none. A claim is stored
//! durably before any byte of a creating request is sent, so a re-run, a redelivered task or
//! a second machine never books the same payment twice.
//!
//! - `entry`: what is kept under a key;
//! - `machine`: the states and every transition (pure);
//! - `holder`: who holds a claim, and whether it is gone;
//! - `store`: what a storage must do (the binding adapts Python journals to it);
//! - `memory`: a storage in this process's memory (`fxpay.MemoryJournal`'s);
//! - `sqlite`: a storage in an SQLite file (`fxpay.SqliteJournal`'s);
//! - `redis`: a storage in Redis (`fxpay.RedisJournal`'s, made from a URL);
//! - `postgres`: a storage in a PostgreSQL table (`fxpay.PostgresJournal`'s, made from a
//!   connection string);
//! - `place`: a durable store's side in this process, shared by the stores of one place;
//! - `durable`: what the durable stores share around their commit; `flush`: their results
//!   waiting, written at exit;
//! - `group_commit`: the writes of concurrent calls share one commit (one flush), with a
//!   commit delay; `later`: a call's result rides the next commit (the durable stores');
//! - `keyed_call`: one creating call under a key (claim, send, record), given the request as
//!   the journal sees it (`KeyedRequest`); `calls`: the four creating calls;
//! - `undo`: a claim the call gave up on (its deadline passed while the journal was slow)
//!   is undone once the journal answers;
//! - `admin`: resolve, list the unknown, complete a spot deal;
//! - `settle`: a keyed spot deal settled by its `DealCreated` (its nonce index);
//! - `background`: the work that outlives its call (undos, results recorded again), counted
//!   so that a normal exit waits for it.
pub(crate) mod admin;
pub(crate) mod background;
pub(crate) mod calls;
pub(crate) mod durable;
pub(crate) mod entry;
pub(crate) mod flush;
pub(crate) mod group_commit;
pub(crate) mod holder;
pub(crate) mod keyed_call;
pub(crate) mod later;
pub(crate) mod machine;
pub(crate) mod memory;
pub(crate) mod payout;
pub(crate) mod place;
pub(crate) mod postgres;
pub(crate) mod redis;
pub(crate) mod settle;
pub(crate) mod sqlite;
pub(crate) mod store;
pub(crate) mod undo;

pub(crate) use entry::State;
