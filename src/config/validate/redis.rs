//! Validation of the idempotency store: `idempotency.store` (`memory`, `redis://…`,
//! `rediss://…`) and the `idempotency.redis` section, checked together.
//!
//! A password never appears in a message: a URL is echoed with its password replaced by
//! `***`, and the password file's contents are never echoed at all.

use serde_saphyr::Spanned;

use super::super::error::{Position, quoted};
use super::super::policy::StoreKind;
use super::super::raw::{RawRedis, RawSentinel};
use super::super::redis::{
    REDIS_TIMEOUT_RANGE, RedisConfig, RedisNode, RedisPassword, RedisTopology,
};
use super::super::units;
use super::Validator;
use super::tls::existing_file;

/// What a `redis://` or `rediss://` URL says.
#[derive(Debug, PartialEq, Eq)]
struct RedisUrl {
    tls: bool,
    username: Option<String>,
    password: Option<RedisPassword>,
    node: RedisNode,
    db: u32,
}

impl Validator<'_> {
    pub(super) fn store(
        &mut self,
        store: Option<Spanned<String>>,
        redis: Option<Spanned<RawRedis>>,
    ) -> StoreKind {
        let store_at = store.as_ref().and_then(Position::of);
        let before = self.errors.len();
        let url = self.parse(store, "idempotency.store", None, store_url);
        let store_failed = self.errors.len() > before;
        match (url, redis) {
            (None, None) => StoreKind::Memory,
            (None, Some(raw)) => {
                if !store_failed {
                    let message = "idempotency.redis: only with a redis:// or rediss:// \
                                   idempotency.store";
                    self.report(Position::of(&raw).or(store_at), message.to_owned());
                }
                StoreKind::Memory
            }
            (Some(url), raw) => {
                let raw = raw.map(|r| r.value).unwrap_or_default();
                StoreKind::Redis(self.redis(url, raw, store_at))
            }
        }
    }

    fn redis(&mut self, url: RedisUrl, raw: RawRedis, store_at: Option<Position>) -> RedisConfig {
        let password_file_at = raw.password_file.as_ref().and_then(Position::of);
        let file_password = self.password_file(raw.password_file);
        if file_password.is_some() && url.password.is_some() {
            let message = "idempotency.redis.password_file: the store URL has a password \
                           too; give it in one place";
            self.report(password_file_at, message.to_owned());
        }
        let ca_file_at = raw.ca_file.as_ref().and_then(Position::of);
        let dir = self.source.dir;
        let ca_file = self.parse(raw.ca_file, "idempotency.redis.ca_file", None, |s| {
            existing_file(dir, s).map(Some)
        });
        if ca_file.is_some() && !url.tls {
            let message = "idempotency.redis.ca_file: only with a rediss:// store (TLS)";
            self.report(ca_file_at, message.to_owned());
        }
        let timeout = self.parse(
            raw.timeout,
            "idempotency.redis.timeout",
            RedisConfig::DEFAULT_TIMEOUT,
            |s| {
                let t = units::duration(s.trim())?;
                if REDIS_TIMEOUT_RANGE.contains(&t) {
                    Ok(t)
                } else {
                    Err(format!("must be between 1ms and 60s, got {}", quoted(s)))
                }
            },
        );
        let topology = self.topology(&url, raw.sentinel, raw.cluster, store_at);
        RedisConfig {
            topology,
            tls: url.tls,
            username: url.username,
            password: url.password.or(file_password),
            db: url.db,
            ca_file,
            timeout,
        }
    }

    fn password_file(&mut self, raw: Option<Spanned<String>>) -> Option<RedisPassword> {
        let dir = self.source.dir;
        self.parse(raw, "idempotency.redis.password_file", None, |s| {
            let path = existing_file(dir, s)?;
            let text = std::fs::read_to_string(&path)
                .map_err(|e| format!("cannot read {}: {e}", quoted(s)))?;
            RedisPassword::from_text(&text)
                .map(Some)
                .ok_or_else(|| format!("{} holds no password (it is empty)", quoted(s)))
        })
    }

    fn topology(
        &mut self,
        url: &RedisUrl,
        sentinel: Option<Spanned<RawSentinel>>,
        cluster: Option<Vec<Spanned<String>>>,
        store_at: Option<Position>,
    ) -> RedisTopology {
        let single = RedisTopology::Single(url.node.clone());
        match (sentinel, cluster) {
            (None, None) => single,
            (Some(sentinel), Some(_)) => {
                let message = "idempotency.redis: give `sentinel` or `cluster`, not both";
                self.report(Position::of(&sentinel), message.to_owned());
                single
            }
            (Some(sentinel), None) => self.sentinel(sentinel),
            (None, Some(nodes)) => {
                if url.db != 0 {
                    let message = format!(
                        "idempotency.store: a Redis Cluster has only database 0, got /{}",
                        url.db
                    );
                    self.report(store_at, message);
                }
                let mut all = vec![url.node.clone()];
                all.extend(self.nodes(nodes, "idempotency.redis.cluster"));
                RedisTopology::Cluster(all)
            }
        }
    }

    fn sentinel(&mut self, raw: Spanned<RawSentinel>) -> RedisTopology {
        let at = Position::of(&raw);
        let RawSentinel { master, addresses } = raw.value;
        let master = self.parse(master, "idempotency.redis.sentinel.master", None, |s| {
            let s = s.trim();
            if s.is_empty() {
                Err("must not be empty".to_owned())
            } else {
                Ok(Some(s.to_owned()))
            }
        });
        let path = "idempotency.redis.sentinel.addresses";
        let addresses = addresses.unwrap_or_default();
        if addresses.is_empty() {
            self.report(
                at,
                format!("{path}: give at least one sentinel as host:port"),
            );
        }
        let sentinels = self.nodes(addresses, path);
        let master = master.unwrap_or_else(|| {
            let message = "idempotency.redis.sentinel.master: the master's name is required";
            self.report(at, message.to_owned());
            String::new()
        });
        RedisTopology::Sentinel { master, sentinels }
    }

    fn nodes(&mut self, raw: Vec<Spanned<String>>, path: &str) -> Vec<RedisNode> {
        let mut nodes = Vec::with_capacity(raw.len());
        for (i, text) in raw.into_iter().enumerate() {
            let path = format!("{path}[{i}]");
            if let Some(node) = self.parse(Some(text), &path, None, |s| node(s, None).map(Some)) {
                nodes.push(node);
            }
        }
        nodes
    }
}

/// `memory` (`None`), or a `redis://` / `rediss://` URL:
/// `redis[s]://[user[:password]@]host[:port][/db]`, user and password percent-decoded.
fn store_url(text: &str) -> Result<Option<RedisUrl>, String> {
    let text = text.trim();
    if text == "memory" {
        return Ok(None);
    }
    let hint = |why: &str| {
        format!(
            "{why}; expected `memory` or redis[s]://[user:password@]host:port/db, got {}",
            quoted(&redacted(text))
        )
    };
    let (tls, rest) = if let Some(rest) = text.strip_prefix("rediss://") {
        (true, rest)
    } else if let Some(rest) = text.strip_prefix("redis://") {
        (false, rest)
    } else {
        return Err(hint("not a Redis URL"));
    };
    let (authority, db) = match rest.split_once('/') {
        Some((a, "")) => (a, 0),
        Some((a, db)) => (a, db.parse::<u32>().map_err(|_| hint("bad database"))?),
        None => (rest, 0),
    };
    let (userinfo, hostport) = match authority.rsplit_once('@') {
        Some((userinfo, hostport)) => (Some(userinfo), hostport),
        None => (None, authority),
    };
    let (username, password) = match userinfo {
        None => (None, None),
        Some(info) => {
            let (user, password) = match info.split_once(':') {
                Some((user, password)) => (user, Some(password)),
                None => (info, None),
            };
            let user = percent_decoded(user).ok_or_else(|| hint("bad user"))?;
            let password = match password {
                Some(p) => Some(percent_decoded(p).ok_or_else(|| hint("bad password"))?),
                None => None,
            };
            let password = password.as_deref().and_then(RedisPassword::from_text);
            ((!user.is_empty()).then_some(user), password)
        }
    };
    let node = node(hostport, Some(6379)).map_err(|_| hint("bad host or port"))?;
    Ok(Some(RedisUrl {
        tls,
        username,
        password,
        node,
        db,
    }))
}

/// `host:port` (`[v6]:port`); the port may be left out when there is a `default`.
fn node(text: &str, default: Option<u16>) -> Result<RedisNode, String> {
    let text = text.trim();
    let invalid = || format!("expected host:port, got {}", quoted(text));
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let (host, after) = rest.split_once(']').ok_or_else(invalid)?;
        (host, after.strip_prefix(':'))
    } else {
        match text.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (text, None),
        }
    };
    let port = match port {
        Some(p) => p.parse::<u16>().ok().filter(|p| *p != 0),
        None => default,
    };
    match port {
        Some(port) if !host.is_empty() && !host.contains(['/', '@', ' ']) => Ok(RedisNode {
            host: host.to_owned(),
            port,
        }),
        _ => Err(invalid()),
    }
}

/// The URL with the password (if any) replaced by `***`, for messages.
fn redacted(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rsplit_once('@') {
        Some((userinfo, _)) if userinfo.contains(':') => {
            let user = userinfo.split_once(':').map_or(userinfo, |(u, _)| u);
            let after = &rest[userinfo.len()..];
            format!("{scheme}://{user}:***{after}")
        }
        _ => url.to_owned(),
    }
}

/// `%XX` escapes decoded; `None` when one is malformed or the result is not UTF-8.
fn percent_decoded(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(text: &str) -> RedisUrl {
        store_url(text).unwrap().unwrap()
    }

    #[test]
    fn urls() {
        assert!(store_url("memory").unwrap().is_none());
        let u = url("redis://cache:6380/2");
        assert_eq!(
            (u.tls, u.node.host.as_str(), u.node.port, u.db),
            (false, "cache", 6380, 2)
        );
        assert_eq!((u.username, u.password), (None, None));
        let u = url("rediss://strata:p%40ss@redis.example/0");
        assert!(u.tls);
        assert_eq!(u.username.as_deref(), Some("strata"));
        assert_eq!(u.password.as_ref().map(|p| p.expose()), Some("p@ss"));
        assert_eq!(u.node.port, 6379);
        let u = url("redis://:secret@[::1]:7000");
        assert_eq!(
            (u.username, u.node.host.as_str(), u.node.port),
            (None, "::1", 7000)
        );
        assert_eq!(u.password.as_ref().map(|p| p.expose()), Some("secret"));
        for bad in [
            "http://h",
            "redis://",
            "redis://h:x",
            "redis://h/x",
            "redis://u:%zz@h",
        ] {
            assert!(store_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn messages_never_show_a_password() {
        let err = store_url("redis://strata:hunter2@h:bad/0").err().unwrap();
        assert!(!err.contains("hunter2"), "{err}");
        assert!(err.contains("redis://strata:***@h:bad/0"), "{err}");
        assert_eq!(redacted("redis://h:1/0"), "redis://h:1/0");
        assert_eq!(redacted("redis://u@h:1/0"), "redis://u@h:1/0");
    }
}
