//! The service's OAuth side: the token endpoint (`token.rs`), the authorize, login and consent
//! pages (`pages.rs`, templates in `html.rs`), the bearer-token check of the API endpoints
//! (`bearer.rs`), and the small browser behind `Sandbox::approve` (`browser.rs`).
pub mod bearer;
pub mod browser;
pub mod html;
pub mod pages;
pub mod registration;
pub mod token;
