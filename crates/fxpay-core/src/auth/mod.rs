//! OAuth: the three grants, the token cache with single-flight renewal, the authorization
//! URL and its state check, and user sessions that refresh with rotation.
pub mod authorize;
pub mod grants;
pub mod store;
pub mod token_cache;
pub mod user_session;

pub use authorize::AuthorizationRequest;
pub use store::TokenStore;
pub use token_cache::TokenCache;
pub use user_session::UserSession;
