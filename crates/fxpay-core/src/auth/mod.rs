//! OAuth: the three grants, the token cache with single-flight renewal, the authorization
//! URL and its state check, and user sessions that refresh with rotation.
pub(crate) mod authorize;
pub(crate) mod grants;
pub(crate) mod store;
pub(crate) mod token_cache;
pub(crate) mod user_session;

pub(crate) use store::TokenStore;
pub(crate) use token_cache::TokenCache;
pub(crate) use user_session::UserSession;
