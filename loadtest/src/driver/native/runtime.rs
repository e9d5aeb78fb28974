//! Where the SDK's async work runs: the [`RuntimeMode`] a run picks, and
//! the runtime each client gets from it (see the driver's `# Runtimes`).

use std::future::Future;

use tokio::runtime::{Handle, Runtime};

use crate::error::LoadError;

/// Where the SDK's async work runs; see the driver's documentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuntimeMode {
    /// One multi-thread runtime with this many workers for all clients.
    Shared { workers: usize },
    /// A current-thread runtime per client.
    PerClient,
}

/// `shared:1`, the cheapest in CPU per message of the three measured on
/// a 2-core machine with the load generator pinned to one core (small-20k:
/// about 26 µs per message against 28–30 µs per-client and 29–32 µs
/// shared:2; small-50k: 13–14 µs against 14.5–15 µs per-client).
impl Default for RuntimeMode {
    fn default() -> Self {
        RuntimeMode::Shared { workers: 1 }
    }
}

impl std::str::FromStr for RuntimeMode {
    type Err = String;
    fn from_str(s: &str) -> Result<RuntimeMode, String> {
        let bad = || format!("`{s}` is not a native runtime: use per-client, shared or shared:N");
        match s.trim() {
            "per-client" => Ok(RuntimeMode::PerClient),
            "shared" => Ok(RuntimeMode::Shared { workers: 1 }),
            other => match other.strip_prefix("shared:").map(str::parse::<usize>) {
                Some(Ok(n)) if (1..=64).contains(&n) => Ok(RuntimeMode::Shared { workers: n }),
                _ => Err(bad()),
            },
        }
    }
}

impl std::fmt::Display for RuntimeMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RuntimeMode::Shared { workers } => write!(f, "shared:{workers}"),
            RuntimeMode::PerClient => f.write_str("per-client"),
        }
    }
}

/// Where one client's async work runs.
pub(super) enum ClientRuntime {
    /// A handle on the driver's shared multi-thread runtime.
    Shared(Handle),
    /// A current-thread runtime driven by whoever calls `block_on` (a
    /// consumer's poll thread, or the caller of an admin call).
    Owned(Runtime),
    /// A current-thread runtime driven by a thread of its own.
    Threaded {
        handle: Handle,
        stop: Option<tokio::sync::oneshot::Sender<()>>,
        thread: Option<std::thread::JoinHandle<()>>,
    },
}

pub(super) fn current_thread() -> Result<Runtime, LoadError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| LoadError::ClientConfig(format!("cannot start a tokio runtime: {e}")))
}

impl ClientRuntime {
    pub(super) fn threaded(name: String) -> Result<ClientRuntime, LoadError> {
        let rt = current_thread()?;
        let handle = rt.handle().clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(name)
            .spawn(move || {
                rt.block_on(async {
                    let _ = stopped.await;
                });
                // Dropping the runtime here cancels what is left of its tasks.
            })
            .map_err(|e| LoadError::Thread(e.to_string()))?;
        Ok(ClientRuntime::Threaded {
            handle,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// Runs `f` to completion from synchronous code (never from inside a
    /// runtime).
    pub(super) fn block_on<F: Future>(&self, f: F) -> F::Output {
        match self {
            ClientRuntime::Shared(h) | ClientRuntime::Threaded { handle: h, .. } => h.block_on(f),
            ClientRuntime::Owned(rt) => rt.block_on(f),
        }
    }
}

impl Drop for ClientRuntime {
    fn drop(&mut self) {
        if let ClientRuntime::Threaded { stop, thread, .. } = self {
            if let Some(stop) = stop.take() {
                let _ = stop.send(());
            }
            if let Some(t) = thread.take() {
                let _ = t.join();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_modes_parse() {
        assert_eq!("per-client".parse(), Ok(RuntimeMode::PerClient));
        assert_eq!("shared".parse(), Ok(RuntimeMode::Shared { workers: 1 }));
        assert_eq!("shared:2".parse(), Ok(RuntimeMode::Shared { workers: 2 }));
        assert!("shared:0".parse::<RuntimeMode>().is_err());
        assert!("threads".parse::<RuntimeMode>().is_err());
        assert_eq!(RuntimeMode::Shared { workers: 3 }.to_string(), "shared:3");
        assert_eq!(RuntimeMode::default(), RuntimeMode::Shared { workers: 1 });
    }
}
