//! How the client reaches a server: a TCP connection of its own, or one through a proxy, with
//! TLS on top for https, all of it within the client's `connect_timeout`.
//!
//! - **Proxies.** The client's own `proxy` takes every request, whatever the environment
//!   says. Without one, `HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY` and `NO_PROXY` (and their
//!   lower-case forms) are read once, when the connection pool is made (hyper-util's
//!   `Matcher::from_env`, the rules curl and reqwest follow). An https request goes through
//!   a CONNECT tunnel (so the proxy sees only the host and port); an http request is sent to
//!   the proxy itself in absolute form. A proxy URL's user and password become its
//!   `Proxy-Authorization` (`Basic`). An `https://` proxy is reached over TLS itself.
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

/// Where connections go: a proxy for the destinations `proxies` intercepts, else direct.
#[derive(Clone)]
pub(crate) struct Route {
    tcp: HttpConnector,
    /// The same TCP connector with TLS for an `https://` proxy (plain for an `http://` one).
    to_proxy: HttpsConnector<HttpConnector>,
    /// None: no proxy at all (nothing set in the environment and none given).
    proxies: Option<Arc<Matcher>>,
}

/// The proxies a client uses: `proxy` for every request, or the environment's; None when
/// there are none (the direct path then asks nothing per connection).
pub(crate) fn proxies(proxy: Option<&str>) -> Result<Option<Arc<Matcher>>, String> {
    let Some(p) = proxy else {
        let set = ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"].iter().any(|k| {
            [k.to_string(), k.to_ascii_lowercase()]
                .iter()
                .any(|k| std::env::var_os(k).is_some_and(|v| !v.is_empty()))
        });
        return Ok(set.then(|| Arc::new(Matcher::from_env())));
    };
    let matcher = Matcher::builder().all(p.to_owned()).build();
    // Every request goes through it: one it would not take means it was not understood.
    for probe in ["http://fxpay.invalid/", "https://fxpay.invalid/"] {
        if matcher.intercept(&Uri::from_static(probe)).is_none() {
            return Err(format!(
                "proxy {p:?} is unusable: it is not an http:// or https:// URL with a host"
            ));
        }
    }
    Ok(Some(Arc::new(matcher)))
}

/// The connector of one pool.
pub(crate) fn connector(
    tls: Arc<rustls::ClientConfig>,
    proxies: Option<Arc<Matcher>>,
    connect_timeout: Duration,
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
    let to_proxy = HttpsConnector::from((tcp.clone(), tls.clone()));
    let route = Route {
        tcp,
        to_proxy,
        proxies,
    };
    Timed {
        inner: HttpsConnector::from((route, tls)),
        limit: connect_timeout,
    }
}

/// The proxy for `dst`, with its `Proxy-Authorization`, if one takes it.
fn proxy_for(proxies: Option<&Matcher>, dst: &Uri) -> Option<(Uri, Option<HeaderValue>)> {
    let hit = proxies?.intercept(dst)?;
    Some((hit.uri().clone(), hit.basic_auth().cloned()))
}

/// The `Proxy-Authorization` an http request to `dst` carries (it is sent to the proxy in
/// absolute form), if its proxy has credentials. A tunnel's credentials go in its CONNECT.
pub(crate) fn forward_auth(proxies: Option<&Matcher>, dst: &Uri) -> Option<HeaderValue> {
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
                Box::pin(async move {
                    Ok(Routed {
                        io: tunnel.call(dst).await?,
                        proxied: false,
                    })
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

/// A connector whose connects end in [`TimedOut`] after `limit`.
#[derive(Clone)]
pub(crate) struct Timed<C> {
    inner: C,
    limit: Duration,
}

impl<C> Service<Uri> for Timed<C>
where
    C: Service<Uri>,
    C::Error: Into<BoxError>,
    C::Future: Send + 'static,
    C::Response: Send + 'static,
{
    type Response = C::Response;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<C::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, dst: Uri) -> Self::Future {
        let connecting = self.inner.call(dst);
        let limit = self.limit;
        Box::pin(async move {
            match tokio::time::timeout(limit, connecting).await {
                Ok(done) => done.map_err(Into::into),
                Err(_) => Err(Box::new(TimedOut) as BoxError),
            }
        })
    }
}
