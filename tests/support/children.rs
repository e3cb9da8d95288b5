//! Child processes a test starts (a client script, mitmdump, a testbed) and ends: each killed
//! and reaped when the test is done, whatever happened.

use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::sleep;
use std::time::Duration;

use tokio::time::Instant;

/// How often a child is looked at while a test waits for it.
const POLL: Duration = Duration::from_millis(50);

/// Named children; dropped, every one still running is killed and all are reaped.
#[derive(Default)]
pub struct Children(Vec<(String, Child)>);

impl Children {
    /// Starts `cmd` as `name` (stdin closed); returns its pid.
    pub fn spawn(&mut self, name: &str, cmd: &mut Command) -> u32 {
        let child = cmd
            .stdin(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
        let pid = child.id();
        self.0.push((name.to_owned(), child));
        pid
    }

    fn child(&mut self, name: &str) -> &mut Child {
        let found = self.0.iter_mut().find(|(n, _)| n == name);
        &mut found.unwrap_or_else(|| panic!("no child {name}")).1
    }

    /// Waits for `name` to exit; kills it at `deadline`.
    pub fn wait(&mut self, name: &str, deadline: Instant) -> ExitStatus {
        let child = self.child(name);
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return status;
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("{name} did not finish in time: killed");
            }
            sleep(POLL);
        }
    }

    /// SIGTERM to `name` (so it can finish what it writes), then waits for it to exit.
    pub fn terminate(&mut self, name: &str, deadline: Instant) {
        self.signal(name, "TERM");
        self.wait(name, deadline);
    }

    /// Whether `name` has exited (e.g. a server that could not bind its port).
    pub fn exited(&mut self, name: &str) -> bool {
        !matches!(self.child(name).try_wait(), Ok(None))
    }

    /// Sends `name` the signal named `signal` (`TERM`, `HUP`).
    pub fn signal(&mut self, name: &str, signal: &str) {
        let pid = self.child(name).id().to_string();
        let sent = Command::new("kill")
            .args([&format!("-{signal}"), &pid])
            .status()
            .unwrap();
        assert!(sent.success(), "cannot signal {name} ({pid})");
    }

    /// Panics if a long-running child (testbed, proxy) has exited.
    pub fn assert_running(&mut self, name: &str) {
        if let Some((_, child)) = self.0.iter_mut().find(|(n, _)| n == name)
            && let Some(status) = child.try_wait().unwrap()
        {
            panic!("{name} exited early: {status}");
        }
    }
}

impl Drop for Children {
    fn drop(&mut self) {
        for (_, child) in &mut self.0 {
            if matches!(child.try_wait(), Ok(None)) {
                let _ = child.kill();
            }
            let _ = child.wait();
        }
    }
}
