use super::*;

fn policy() -> Policy {
    Policy::new(&PolicyConfig::default(), Default::default())
}

fn attempt(made: u32) -> Attempt<'static> {
    Attempt {
        made,
        idempotent: true,
        replayable: true,
        elapsed: Duration::ZERO,
        retry_after: None,
    }
}

#[tokio::test(start_paused = true)]
async fn retries_named_failures_only() {
    let p = policy();
    p.deposit(tokio::time::Instant::now());
    let status = |s: u16| Failure::Status(StatusCode::from_u16(s).unwrap());
    assert!(matches!(
        p.next(status(503), &attempt(1)),
        Next::Retry {
            reason: RetryReason::Http503,
            ..
        }
    ));
    assert_eq!(p.next(status(500), &attempt(1)), Next::GiveUp(None));
    assert_eq!(p.next(status(404), &attempt(1)), Next::GiveUp(None));
    // upstream_reset is not in the default `on` list.
    assert_eq!(
        p.next(Failure::UpstreamReset, &attempt(1)),
        Next::GiveUp(None)
    );
}

#[tokio::test(start_paused = true)]
async fn suppression_reasons() {
    let p = policy();
    let f = Failure::ConnectError;
    let a = Attempt {
        idempotent: false,
        ..attempt(1)
    };
    assert_eq!(
        p.next(f, &a),
        Next::GiveUp(Some(SuppressReason::NotIdempotent))
    );
    let a = Attempt {
        replayable: false,
        ..attempt(1)
    };
    assert_eq!(
        p.next(f, &a),
        Next::GiveUp(Some(SuppressReason::BodyTooLarge))
    );
    assert_eq!(
        p.next(f, &attempt(3)),
        Next::GiveUp(Some(SuppressReason::AttemptsExhausted))
    );
    let a = Attempt {
        elapsed: Duration::from_secs(30),
        ..attempt(1)
    };
    assert_eq!(p.next(f, &a), Next::GiveUp(Some(SuppressReason::Deadline)));
}

#[tokio::test(start_paused = true)]
async fn retry_after_is_honoured_up_to_the_cap() {
    let p = policy();
    p.deposit(tokio::time::Instant::now());
    let a = Attempt {
        retry_after: Some(b"1"),
        ..attempt(1)
    };
    let f = Failure::Status(StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        p.next(f, &a),
        Next::Retry {
            wait: Duration::from_secs(1),
            reason: RetryReason::Http429
        }
    );
    let a = Attempt {
        retry_after: Some(b"6"),
        ..attempt(1)
    };
    assert_eq!(
        p.next(f, &a),
        Next::GiveUp(Some(SuppressReason::RetryAfterTooLong))
    );
}

#[tokio::test(start_paused = true)]
async fn budget_bounds_retries() {
    let mut config = PolicyConfig::default();
    config.retry.budget.min_per_second = 0;
    config.retry.budget.ratio = 0.5;
    let p = Policy::new(&config, Default::default());
    for _ in 0..10 {
        p.deposit(tokio::time::Instant::now());
    }
    let granted = (0..10)
        .filter(|_| {
            matches!(
                p.next(Failure::ConnectError, &attempt(1)),
                Next::Retry { .. }
            )
        })
        .count();
    assert_eq!(granted, 5);
    assert_eq!(
        p.next(Failure::ConnectError, &attempt(1)),
        Next::GiveUp(Some(SuppressReason::BudgetExhausted))
    );
}
