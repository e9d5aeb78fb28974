use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;

/// However many logins arrive at once, no more than `concurrent` steps
/// run at a time; the others wait and then run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_more_login_steps_run_at_once_than_allowed() {
    let logins = Arc::new(Logins::new(&LoginLimits {
        concurrent: 2,
        ..LoginLimits::default()
    }));
    let running = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..12)
        .map(|i| {
            let (logins, running, most) = (logins.clone(), running.clone(), most.clone());
            tokio::spawn(async move {
                logins
                    .run(move || {
                        let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        // a password check's worth of work
                        std::thread::sleep(Duration::from_millis(20));
                        running.fetch_sub(1, Ordering::SeqCst);
                        i
                    })
                    .await
            })
        })
        .collect();
    let mut done = Vec::new();
    for t in tasks {
        done.push(t.await.expect("joined").expect("ran"));
    }
    done.sort_unstable();
    assert_eq!(done, (0..12).collect::<Vec<_>>(), "every step ran");
    let most = most.load(Ordering::SeqCst);
    assert!((1..=2).contains(&most), "{most} steps ran at once");
}
