//! How the client reaches a server: a TCP connection of its own, or one through a proxy, with
//! TLS on top for https, all of it within the client's `connect_timeout`.
//!
//! - **Proxies.** The client's own `proxy` takes every request, whatever the environment
//!   says. Without one, `HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY` and `NO_PROXY` (and their
//!   lower-case forms) are read once, when the connection pool is made (hyper-util's
//!   `Matcher::from_system`, the rules curl and reqwest follow; on macOS and Windows the
//!   system's proxy settings when none is set). A proxy URL that cannot be used (the
//!   client's or the environment's) is a configuration error whose text hides the password;
//!   never a direct connection. `NO_PROXY` also takes `host:port` and `*.domain` entries. An https request goes through
//!   a CONNECT tunnel (so the proxy sees only the host and port); an http request is sent to
//!   the proxy itself in absolute form. A proxy URL's user and password become its
//!   `Proxy-Authorization` (`Basic`); a CONNECT carries the client's `User-Agent`, and a 407
//!   answer to it is final. An `https://` proxy is reached over TLS itself, offered
//!   `http/1.1` alone by ALPN.
//! - **TLS.** hyper-rustls over the client's rustls configuration (`crate::tls`: its roots,
//!   its identity, ALPN `h2` then `http/1.1`); the server's name is the request's host.
//! - **TCP.** `TCP_NODELAY`, and the keepalive probes reqwest sets by default (after 15 s
//!   idle, every 15 s, 3 of them; on Linux, unacknowledged data gives up after 30 s).
use http::header::HeaderValue;
use http::uri::Scheme;
use http::Uri;
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_rustls::{HttpsConnector, MaybeHttpsStream};
use hyper_util::client::legacy::connect::proxy::Tunnel;
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::client::proxy::matcher::Matcher;
use hyper_util::rt::TokioIo;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::net::TcpStream;
use tower_service::Service;

pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A connection's stream below TLS: TCP to the server or to a proxy, or TLS to an
/// `https://` proxy (or through its tunnel).
type Below = MaybeHttpsStream<TokioIo<TcpStream>>;

/// The whole connector the pool uses: TLS (for https) over [`Route`], within a time limit.
pub(crate) type Connector = Timed<HttpsConnector<Route>>;

/// A connect that did not finish within `connect_timeout` (TCP, a proxy's tunnel and the TLS
/// handshake together). Its text is the one reqwest gave.
#[derive(Debug)]
pub(crate) struct TimedOut;

impl std::fmt::Display for TimedOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("operation timed out")
    }
}

impl std::error::Error for TimedOut {}

/// The proxy answered a CONNECT with 407: its credentials are missing or wrong. Trying again
/// would get the same answer.
#[derive(Debug)]
pub(crate) struct ProxyAuthRequired;

impl std::fmt::Display for ProxyAuthRequired {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(
            "the proxy answered 407 Proxy Authentication Required: the user and password of \
             the proxy URL are missing or wrong",
        )
    }
}

impl std::error::Error for ProxyAuthRequired {}

/// Where connections go: a proxy for the destinations `proxies` intercepts, else direct.
#[derive(Clone)]
pub(crate) struct Route {
    tcp: HttpConnector,
    /// The same TCP connector with TLS for an `https://` proxy (plain for an `http://` one);
    /// its TLS offers `http/1.1` alone by ALPN (a CONNECT is HTTP/1.1).
    to_proxy: HttpsConnector<HttpConnector>,
    /// None: no proxy at all (nothing set in the environment and none given).
    proxies: Option<Arc<Proxies>>,
    /// Sent in each CONNECT, as with every request.
    user_agent: Option<HeaderValue>,
}

/// A client's proxy rules: hyper-util's matcher, and the `NO_PROXY` entries it does not
/// understand (`host:port`, `*.domain`), checked first.
pub(crate) struct Proxies {
    matcher: Matcher,
    /// `NO_PROXY` entries with a port: (host in lower case, port).
    no_ports: Vec<(String, u16)>,
    /// `NO_PROXY` entries `*.domain`: the `.domain` (lower case) a host must end with.
    no_wildcards: Vec<String>,
}

impl Proxies {
    fn new(matcher: Matcher) -> Proxies {
        Proxies {
            matcher,
            no_ports: Vec::new(),
            no_wildcards: Vec::new(),
        }
    }

    /// The entries of a `NO_PROXY` list hyper-util does not understand: `*.domain` (any
    /// host below `domain`) and `host:port` / `[v6]:port` (that host on that port only).
    fn add_no_proxy(&mut self, no: &str) {
        for entry in no.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let entry = entry.to_ascii_lowercase();
            if let Some(domain) = entry.strip_prefix("*.") {
                self.no_wildcards.push(format!(".{domain}"));
            } else if let Some((host, port)) = entry.rsplit_once(':') {
                // A bare IPv6 address has colons too, and is hyper-util's.
                let v6_bare = host.contains(':') && !host.starts_with('[');
                if let (Ok(port), false) = (port.parse::<u16>(), v6_bare) {
                    let host = host.trim_start_matches('[').trim_end_matches(']');
                    self.no_ports.push((host.to_owned(), port));
                }
            }
        }
    }

    /// The proxy for `dst`, if one takes it.
    fn intercept(&self, dst: &Uri) -> Option<hyper_util::client::proxy::matcher::Intercept> {
        if !(self.no_ports.is_empty() && self.no_wildcards.is_empty()) {
            let host = dst.host()?.trim_start_matches('[').trim_end_matches(']');
            let host = host.to_ascii_lowercase();
            let port = dst
                .port_u16()
                .unwrap_or(if dst.scheme() == Some(&Scheme::HTTPS) {
                    443
                } else {
                    80
                });
            if self.no_ports.iter().any(|(h, p)| *h == host && *p == port)
                || self.no_wildcards.iter().any(|d| host.ends_with(d.as_str()))
            {
                return None;
            }
        }
        self.matcher.intercept(dst)
    }
}

/// The environment's variables hyper-util reads, first set name of each pair.
const ENV_PROXIES: [[&str; 2]; 3] = [
    ["ALL_PROXY", "all_proxy"],
    ["HTTPS_PROXY", "https_proxy"],
    ["HTTP_PROXY", "http_proxy"],
];

fn first_env(names: &[&'static str; 2]) -> Option<(&'static str, String)> {
    names
        .iter()
        .find_map(|n| std::env::var(n).ok().map(|v| (*n, v)))
}

/// `url` with the user's password (or a lone user's name) hidden: `http://user:****@host`.
/// Everything before the last `@` is taken as user information, so a password holding a
/// raw `@` or `/` is hidden whole.
pub(crate) fn redact(url: &str) -> String {
    let Some(at) = url.rfind('@') else {
        return url.to_owned();
    };
    let start = url.find("://").map_or(0, |i| i + 3).min(at);
    let userinfo = &url[start..at];
    let user = match userinfo.split_once(':') {
        Some((user, _)) => user,
        None => "****",
    };
    // A user name with a raw `/`, `?` or `#` would be read as a path: hidden too.
    let user = if user.contains(['/', '?', '#', ' ', '\t', '\n', '\r']) {
        "****"
    } else {
        user
    };
    let hidden = if userinfo.contains(':') {
        format!("{user}:****")
    } else {
        user.to_owned()
    };
    format!("{}{hidden}{}", &url[..start], &url[at..])
}

/// Checks a proxy URL as hyper-util will read it (`http::Uri`): `what` names it in the
/// error, which shows the URL with its password hidden. `scheme_optional`: a bare
/// `host:port` is an `http://` proxy (as the environment's may be written).
pub(crate) fn check_proxy_url(what: &str, url: &str, scheme_optional: bool) -> Result<(), String> {
    let shown = redact(url);
    let authority_end = |rest: &str| rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    // The user information ends at the last `@` before the host; a second `@` is a raw one
    // in the user or password, which would cut the password short.
    let userinfo_ats = rest.matches('@').count();
    if userinfo_ats > 1 {
        return Err(format!(
            "{what} {shown:?} has a raw '@' in its user or password: percent-encode it as %40"
        ));
    }
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "{what} {shown:?} is not a URL: it holds a space, tab, newline or other control \
             character (percent-encode one that belongs to the user or password)"
        ));
    }
    let uri = url
        .parse::<Uri>()
        .map_err(|_| format!("{what} {shown:?} is not a URL like http://host:port"))?;
    match uri.scheme_str() {
        Some("http" | "https") => {}
        None if scheme_optional => {}
        _ => {
            return Err(format!(
                "{what} {shown:?} must be an http:// or https:// URL with a host, like \
                 http://proxy.internal:3128"
            ))
        }
    }
    let host = uri.host().unwrap_or("");
    if host.is_empty() || authority_end(rest) == 0 {
        return Err(format!("{what} {shown:?} has no host"));
    }
    Ok(())
}

/// The proxies a client uses: `proxy` for every request, or the environment's (on macOS and
/// Windows also the system's settings); None when there are none (the direct path then
/// asks nothing per connection). A proxy URL that cannot be used is an error, never a
/// direct connection.
pub(crate) fn proxies(proxy: Option<&str>) -> Result<Option<Arc<Proxies>>, String> {
    let Some(p) = proxy else {
        return from_env();
    };
    check_proxy_url("proxy", p, false)?;
    let matcher = Matcher::builder().all(p.to_owned()).build();
    // Every request goes through it: one it would not take means it was not understood.
    for probe in ["http://fxpay.invalid/", "https://fxpay.invalid/"] {
        if matcher.intercept(&Uri::from_static(probe)).is_none() {
            return Err(format!(
                "proxy {:?} is unusable: it is not an http:// or https:// URL with a host",
                redact(p)
            ));
        }
    }
    Ok(Some(Arc::new(Proxies::new(matcher))))
}

/// The environment's proxies (`Matcher::from_system`: the environment's variables, and on
/// macOS and Windows the system's settings when they are unset).
fn from_env() -> Result<Option<Arc<Proxies>>, String> {
    // hyper-util takes no proxy from the environment of a CGI script (httpoxy): nor is it
    // checked here.
    let cgi = std::env::var_os("REQUEST_METHOD").is_some();
    let mut set = false;
    for names in &ENV_PROXIES {
        let Some((name, value)) = first_env(names) else {
            continue;
        };
        if value.is_empty() || cgi {
            continue;
        }
        set = true;
        // socks proxies are hyper-util's to take or leave.
        if !value.to_ascii_lowercase().starts_with("socks") {
            check_proxy_url(name, &value, true)?;
        }
    }
    if !set && !cfg!(any(target_os = "macos", windows)) {
        return Ok(None);
    }
    let mut proxies = Proxies::new(Matcher::from_system());
    if let Some((_, no)) = first_env(&["NO_PROXY", "no_proxy"]) {
        proxies.add_no_proxy(&no);
    }
    Ok(Some(Arc::new(proxies)))
}

/// The connector of one pool.
pub(crate) fn connector(
    tls: Arc<rustls::ClientConfig>,
    proxies: Option<Arc<Proxies>>,
    connect_timeout: Duration,
    user_agent: Option<HeaderValue>,
) -> Connector {
    let mut tcp = HttpConnector::new();
    tcp.enforce_http(false);
    tcp.set_nodelay(true);
    tcp.set_connect_timeout(Some(connect_timeout));
    tcp.set_keepalive(Some(Duration::from_secs(15)));
    tcp.set_keepalive_interval(Some(Duration::from_secs(15)));
    tcp.set_keepalive_retries(Some(3));
    #[cfg(target_os = "linux")]
    tcp.set_tcp_user_timeout(Some(Duration::from_secs(30)));
    // A proxy is spoken to in HTTP/1.1 (a CONNECT, or a request in absolute form): its TLS
    // offers nothing else, as reqwest's does.
    let mut proxy_tls = (*tls).clone();
    proxy_tls.alpn_protocols = vec![b"http/1.1".to_vec()];
    let to_proxy = HttpsConnector::from((tcp.clone(), Arc::new(proxy_tls)));
    let route = Route {
        tcp,
        to_proxy,
        proxies,
        user_agent,
    };
    Timed {
        inner: Arc::new(HttpsConnector::from((route, tls))),
        limit: connect_timeout,
    }
}

/// The proxy for `dst`, with its `Proxy-Authorization`, if one takes it.
fn proxy_for(proxies: Option<&Proxies>, dst: &Uri) -> Option<(Uri, Option<HeaderValue>)> {
    let hit = proxies?.intercept(dst)?;
    Some((hit.uri().clone(), hit.basic_auth().cloned()))
}

/// The `Proxy-Authorization` an http request to `dst` carries (it is sent to the proxy in
/// absolute form), if its proxy has credentials. A tunnel's credentials go in its CONNECT.
pub(crate) fn forward_auth(proxies: Option<&Proxies>, dst: &Uri) -> Option<HeaderValue> {
    if dst.scheme() == Some(&Scheme::HTTPS) {
        return None;
    }
    proxy_for(proxies, dst)?.1
}

impl Service<Uri> for Route {
    type Response = Routed;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Routed, BoxError>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, dst: Uri) -> Self::Future {
        match proxy_for(self.proxies.as_deref(), &dst) {
            None => {
                let tcp = self.tcp.call(dst);
                Box::pin(async move {
                    Ok(Routed {
                        io: MaybeHttpsStream::Http(tcp.await?),
                        proxied: false,
                    })
                })
            }
            Some((proxy, auth)) if dst.scheme() == Some(&Scheme::HTTPS) => {
                let mut tunnel = Tunnel::new(proxy, self.to_proxy.clone());
                if let Some(auth) = auth {
                    tunnel = tunnel.with_auth(auth);
                }
                if let Some(ua) = &self.user_agent {
                    let mut headers = http::HeaderMap::new();
                    headers.insert(http::header::USER_AGENT, ua.clone());
                    tunnel = tunnel.with_headers(headers);
                }
                Box::pin(async move {
                    match tunnel.call(dst).await {
                        Ok(io) => Ok(Routed { io, proxied: false }),
                        // hyper-util's error type is private: its text tells a 407.
                        Err(e) if e.to_string().ends_with("proxy authorization required") => {
                            Err(Box::new(ProxyAuthRequired) as BoxError)
                        }
                        Err(e) => Err(e.into()),
                    }
                })
            }
            Some((proxy, _)) => {
                let to_proxy = self.to_proxy.call(proxy);
                Box::pin(async move {
                    Ok(Routed {
                        io: to_proxy.await?,
                        proxied: true,
                    })
                })
            }
        }
    }
}

/// A connection [`Route`] made; `proxied` when requests on it go to an http proxy in
/// absolute form.
pub(crate) struct Routed {
    io: Below,
    proxied: bool,
}

impl Connection for Routed {
    fn connected(&self) -> Connected {
        self.io.connected().proxy(self.proxied)
    }
}

impl Read for Routed {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl Write for Routed {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }
}

/// A connector whose connects end in [`TimedOut`] after `limit`. hyper-util's client clones
/// its connector for every request, pooled connection or not: behind an `Arc` that is one
/// count, and the connector itself is cloned only when a connection is made.
pub(crate) struct Timed<C> {
    inner: Arc<C>,
    limit: Duration,
}

impl<C> Clone for Timed<C> {
    fn clone(&self) -> Self {
        Timed {
            inner: Arc::clone(&self.inner),
            limit: self.limit,
        }
    }
}

impl<C> Service<Uri> for Timed<C>
where
    C: Service<Uri> + Clone,
    C::Error: Into<BoxError>,
    C::Future: Send + 'static,
    C::Response: Send + 'static,
{
    type Response = Boxed<C::Response>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Boxed<C::Response>, BoxError>> + Send>>;

    /// Always ready: [`Route`] and the TLS connector over it are, and `call` readies the
    /// clone it calls.
    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, dst: Uri) -> Self::Future {
        let connecting = (*self.inner).clone().call(dst);
        let limit = self.limit;
        Box::pin(async move {
            match tokio::time::timeout(limit, connecting).await {
                Ok(done) => done.map(|io| Boxed(Box::new(io))).map_err(Into::into),
                Err(_) => Err(Box::new(TimedOut) as BoxError),
            }
        })
    }
}

/// A connection as hyper-util gets it: behind one pointer. The stream is large (2 KiB: a
/// rustls connection inline for the server, and one for an https proxy, whichever is used),
/// and hyper-util moves it through several futures while it sets a connection up; measured
/// under callgrind, those moves were a third of a new connection's instructions.
pub(crate) struct Boxed<T>(Box<T>);

impl<T: Connection> Connection for Boxed<T> {
    fn connected(&self) -> Connected {
        self.0.connected()
    }
}

impl<T: Read + Unpin> Read for Boxed<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0).poll_read(cx, buf)
    }
}

impl<T: Write + Unpin> Write for Boxed<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut *self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut *self.0).poll_write_vectored(cx, bufs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn through(no_proxy: &str, dst: &'static str) -> bool {
        let mut p = Proxies::new(
            Matcher::builder()
                .all("http://127.0.0.1:3128".to_owned())
                .no(no_proxy.to_owned())
                .build(),
        );
        p.add_no_proxy(no_proxy);
        p.intercept(&Uri::from_static(dst)).is_some()
    }

    #[test]
    fn no_proxy_takes_wildcards_and_ports() {
        let no = "*.corp.example, api.example:8443, [::1]:9000, 10.0.0.0/8, plain.example";
        for (dst, proxied) in [
            ("https://a.corp.example/", false),
            ("https://a.b.corp.example:444/", false),
            ("https://corp.example.org/", true),
            ("https://notcorp.example/", true),
            ("https://api.example:8443/", false),
            ("https://api.example/", true),
            ("http://api.example:8443/", false),
            ("https://[::1]:9000/", false),
            ("https://[::1]:9001/", true),
            ("https://10.1.2.3/", false),
            ("https://www.plain.example/", false),
            ("https://other.example/", true),
        ] {
            assert_eq!(through(no, dst), proxied, "{dst}");
        }
    }

    #[test]
    fn redaction_hides_the_password_whole() {
        for (url, shown) in [
            ("http://alice:pw@h:1", "http://alice:****@h:1"),
            ("http://alice:p@w@h:1", "http://alice:****@h:1"),
            ("http://alice:p/w@h:1", "http://alice:****@h:1"),
            ("http://token@h:1", "http://****@h:1"),
            ("alice:pw@h:1", "alice:****@h:1"),
            ("http://h:1", "http://h:1"),
        ] {
            assert_eq!(redact(url), shown, "{url}");
        }
    }
}
