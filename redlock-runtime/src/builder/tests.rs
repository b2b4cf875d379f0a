//! The builder's checks: one target, settings the target uses, ranges.

use super::*;

fn refused(builder: LockClientBuilder) -> ConfigError {
    match builder.build_unchecked() {
        Err(LockError::Config(e)) => e,
        other => panic!("expected a config error, got {other:?}"),
    }
}

#[test]
fn a_builder_takes_one_target() {
    let e = refused(LockClient::builder().url("redis://127.0.0.1:1").redlock([
        "redis://127.0.0.1:2",
        "redis://127.0.0.1:3",
        "redis://127.0.0.1:4",
    ]));
    assert_eq!(
        e,
        ConfigError::ConflictingTargets {
            first: "`.url(..)`",
            second: "`.redlock(..)`"
        }
    );
    assert!(e.to_string().contains("keep one"), "{e}");
    let e = refused(LockClient::builder().in_memory().url("redis://127.0.0.1:1"));
    assert!(matches!(e, ConfigError::ConflictingTargets { .. }), "{e}");
    assert_eq!(refused(LockClient::builder()), ConfigError::MissingRedis);
}

#[test]
fn a_setting_the_target_does_not_use_is_refused_not_ignored() {
    let url = || LockClient::builder().url("redis://127.0.0.1:1");
    for (builder, setting) in [
        (url().node_timeout(Duration::from_millis(5)), "node_timeout"),
        (url().restart_delay(Duration::from_secs(5)), "restart_delay"),
        (
            LockClient::builder()
                .in_memory()
                .replicas(1, Duration::from_millis(50)),
            "replicas",
        ),
        (LockClient::builder().in_memory().pool_size(2), "pool_size"),
        (
            LockClient::builder()
                .in_memory()
                .connection_timeout(Duration::from_secs(1)),
            "connection_timeout",
        ),
        (
            LockClient::builder().in_memory().require_noeviction(true),
            "require_noeviction",
        ),
        (
            LockClient::builder().in_memory().coalesce(false),
            "coalesce",
        ),
        (
            LockClient::builder()
                .cluster(["redis://127.0.0.1:2"])
                .coalesce(true),
            "coalesce",
        ),
        (
            LockClient::builder()
                .redlock([
                    "redis://127.0.0.1:2",
                    "redis://127.0.0.1:3",
                    "redis://127.0.0.1:4",
                ])
                .coalesce(false),
            "coalesce",
        ),
    ] {
        match refused(builder) {
            ConfigError::NotForTarget { setting: s, .. } => assert_eq!(s, setting),
            other => panic!("{setting}: {other:?}"),
        }
    }
}

#[tokio::test]
async fn the_settings_a_target_uses_build() {
    let redlock = LockClient::builder()
        .redlock([
            "redis://127.0.0.1:2",
            "redis://127.0.0.1:3",
            "redis://127.0.0.1:4",
        ])
        .node_timeout(Duration::from_millis(50))
        .restart_delay(Duration::from_secs(1))
        .pool_size(2)
        .build_unchecked()
        .expect("Redlock settings on a Redlock client");
    assert_eq!(redlock.mode(), crate::Mode::Redlock);
    for coalesce in [true, false] {
        LockClient::builder()
            .url("redis://127.0.0.1:1")
            .coalesce(coalesce)
            .build_unchecked()
            .expect("coalescing on one Redis");
        LockClient::builder()
            .sentinel(["redis://127.0.0.1:2"], "m")
            .coalesce(coalesce)
            .build_unchecked()
            .expect("coalescing on a Sentinel primary");
    }
    let memory = LockClient::builder()
        .in_memory()
        .key_prefix("t:")
        .build()
        .await
        .expect("an in-memory client");
    assert_eq!(
        (memory.mode(), memory.key_prefix()),
        (crate::Mode::Memory, "t:")
    );
}
