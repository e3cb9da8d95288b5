//! `strata demo` and `strata testbed`.

use std::net::SocketAddr;
use std::process::ExitCode;

use crate::testbed::Testbed;

/// `strata testbed`: the fault-injection upstream alone, until Ctrl-C.
pub async fn testbed(listen: SocketAddr) -> ExitCode {
    let listener = match tokio::net::TcpListener::bind(listen).await {
        Ok(l) => l,
        Err(err) => {
            eprintln!("strata testbed: cannot bind {listen}: {err}");
            return ExitCode::FAILURE;
        }
    };
    println!("strata testbed: MCP upstream on http://{listen}/mcp (Ctrl-C to stop)");
    let stop = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    match Testbed::new().serve(listener, stop).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("strata testbed: {err}");
            ExitCode::FAILURE
        }
    }
}

/// `strata demo`: placeholder until the demo lands.
pub async fn run() -> ExitCode {
    ExitCode::SUCCESS
}
