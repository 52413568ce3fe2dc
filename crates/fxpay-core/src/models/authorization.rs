//! The authorization-code flow's first half, as kept between the two requests.
use serde::{Deserialize, Serialize};

model! {
    /// An authorization URL with the state, redirect URI and PKCE verifier it was made with.
    /// Its wire form keeps every field (it must survive a trip through the user's session);
    /// `Debug` and `repr` show none of the secrets.
    #[derive(Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
    pub struct AuthorizationRequest secret(url, state, code_verifier) {
        pub url: String,
        pub state: String,
        pub redirect_uri: String,
        /// The RFC 7636 `code_verifier` whose `S256` challenge the URL carries (None without PKCE).
        #[serde(default)]
        pub code_verifier: Option<String>,
    }
}

impl std::fmt::Debug for AuthorizationRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthorizationRequest")
            .field("redirect_uri", &self.redirect_uri)
            .finish_non_exhaustive()
    }
}
