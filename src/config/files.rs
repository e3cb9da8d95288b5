//! The files a config reads besides itself, each read again at every reload: what a change
//! on disk can make a reload pick up (`config_watch.rs` watches them).

use std::path::Path;

use super::Config;

impl Config {
    /// The agent TLS certificate, key and client CA, the upstream CA and the inspector's
    /// token file, those that are set. The collector's CA file is not among them: it is read
    /// when the export starts, and a reload keeps an export whose settings did not change.
    pub fn files_read(&self) -> Vec<&Path> {
        let tls = self.tls.iter().flat_map(|tls| {
            [
                Some(&tls.cert_file),
                Some(&tls.key_file),
                tls.client_ca_file.as_ref(),
            ]
        });
        let others = [
            self.upstream_tls.ca_file.as_ref(),
            self.inspector.token_file.as_ref(),
        ];
        tls.chain(others).flatten().map(|p| p.as_path()).collect()
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::config::{ListenTls, Upstream};

    #[test]
    fn every_file_set_and_none_other() {
        let mut config = Config::default_with_upstream(Upstream::parse("http://h:1").unwrap());
        assert!(config.files_read().is_empty());
        config.tls = Some(ListenTls {
            cert_file: PathBuf::from("c.pem"),
            key_file: PathBuf::from("k.pem"),
            client_ca_file: Some(PathBuf::from("agents.pem")),
        });
        config.upstream_tls.ca_file = Some(PathBuf::from("up.pem"));
        config.inspector.token_file = Some(PathBuf::from("token"));
        let names: Vec<&str> = config
            .files_read()
            .iter()
            .filter_map(|p| p.to_str())
            .collect();
        assert_eq!(names, ["c.pem", "k.pem", "agents.pem", "up.pem", "token"]);
    }
}
