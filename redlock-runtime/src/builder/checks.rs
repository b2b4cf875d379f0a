//! The builder's checks: every setting against the target it applies to,
//! before anything is opened.

use std::time::Duration;

use super::LockClientBuilder;
use crate::error::ConfigError;
use crate::target::Target;
use crate::util::{MAX_PREFIX_LEN, redact_url, validate_ttl};

impl LockClientBuilder {
    /// The target, once every setting is checked against it.
    pub(super) fn checked(&mut self) -> Result<Target, ConfigError> {
        if let Some((first, second)) = self.conflict {
            return Err(ConfigError::ConflictingTargets { first, second });
        }
        let target = self.target.take().ok_or(ConfigError::MissingRedis)?;
        let setter = target.setter();
        let not_for = |setting, hint| ConfigError::NotForTarget {
            setting,
            target: setter,
            hint,
        };
        let redlock = matches!(target, Target::Redlock(_));
        let memory = matches!(target, Target::Memory);
        // Connections the user made: their sizes and timeouts are theirs.
        let pool = matches!(target, Target::Pool(_) | Target::Manager(_));
        if matches!(target, Target::Manager(_)) && self.replicas.is_some() {
            return Err(not_for(
                "replicas",
                "`WAIT` blocks the connection it is sent on, and a ConnectionManager is one \
                 connection that every command shares; use `.url(..)` or `.pool(..)`",
            ));
        }
        if let Some(urls) = self.tls.as_ref().map(|_| target.urls()) {
            if urls.is_empty() {
                return Err(not_for(
                    "tls_certificates",
                    "they apply to the connections the client opens from `rediss://` URLs",
                ));
            }
            if let Some(plain) = urls.iter().find(|u| !u.starts_with("rediss://")) {
                return Err(ConfigError::InvalidUrl {
                    url: redact_url(plain),
                    reason: "TLS certificates were given, but this URL is not TLS: write \
                             `rediss://`"
                        .to_owned(),
                });
            }
        }
        if let Some(tls) = &self.tls {
            // Read and checked now (where they are meant for: after the
            // URLs): a bad file fails here, naming it.
            self.tls = Some(tls.checked()?);
        }
        if !matches!(target, Target::Sentinel { .. }) && self.sentinel_announcements.is_some() {
            return Err(not_for(
                "sentinel_announcements",
                "it is a Sentinel setting: use it with `.sentinel(urls, master)`",
            ));
        }
        if !redlock && self.node_timeout.is_some() {
            return Err(not_for(
                "node_timeout",
                "it is a Redlock setting: use it with `.redlock(urls)`",
            ));
        }
        if !redlock && self.restart_delay.is_some() {
            return Err(not_for(
                "restart_delay",
                "it is a Redlock setting: use it with `.redlock(urls)`",
            ));
        }
        if memory && self.replicas.is_some() {
            return Err(not_for(
                "replicas",
                "replicas acknowledge writes to a Redis primary",
            ));
        }
        if memory && self.require_noeviction.is_some() {
            return Err(not_for(
                "require_noeviction",
                "it checks a Redis server's eviction policy",
            ));
        }
        if (memory || pool) && self.pool_size.is_some() {
            return Err(not_for(
                "pool_size",
                "it sizes the pools the client opens from URLs; a pool you built has its own size",
            ));
        }
        if self.coalesce.is_some()
            && matches!(
                target,
                Target::Memory | Target::Redlock(_) | Target::Cluster(_)
            )
        {
            return Err(not_for(
                "coalesce",
                "calls are coalesced on one Redis or a Sentinel primary only: a cluster's or \
                 Redlock's are sent one by one",
            ));
        }
        if (memory || pool) && self.connection_timeout.is_some() {
            return Err(not_for(
                "connection_timeout",
                "it applies to the connections the client opens from URLs; set a pool's own on its bb8 builder",
            ));
        }
        let s = &self.settings;
        validate_ttl("default_ttl", s.default_ttl)?;
        if s.key_prefix.len() > MAX_PREFIX_LEN {
            return Err(ConfigError::PrefixTooLong {
                len: s.key_prefix.len(),
                max: MAX_PREFIX_LEN,
            });
        }
        for (name, value) in [
            ("command_timeout", Some(s.command_timeout)),
            ("connection_timeout", self.connection_timeout),
            ("node_timeout", self.node_timeout),
        ] {
            if let Some(value) = value
                && value < Duration::from_millis(1)
            {
                return Err(ConfigError::InvalidDuration {
                    name,
                    value,
                    reason: "must be at least 1 ms",
                });
            }
        }
        if self.pool_size == Some(0) {
            return Err(ConfigError::ZeroPoolSize);
        }
        if s.fence_retention < Duration::from_secs(1) {
            return Err(ConfigError::InvalidDuration {
                name: "fencing_retention",
                value: s.fence_retention,
                reason: "must be at least 1 s (and longer than the clock skew between Redlock \
                         nodes)",
            });
        }
        validate_ttl("fencing_retention", s.fence_retention)?;
        if let Some(r) = self.replicas
            && (r.count == 0 || r.timeout.is_zero())
        {
            return Err(ConfigError::InvalidDuration {
                name: "replicas timeout",
                value: r.timeout,
                reason: "`.replicas(count, timeout)` needs a count and a timeout above zero",
            });
        }
        s.retry.validate()?;
        if let Some(reason) = crate::owner::invalid_name(&s.client_name) {
            return Err(ConfigError::InvalidClientName { reason });
        }
        Ok(target)
    }
}
