//! Raw identifiers are placeholders by their plain name (`<type>` for
//! `r#type`, `<item.ref>` for a field `r#ref`), and a `macro_rules!` may
//! write the function and its attribute, the key and the arguments coming
//! from different places.
use redlock_runtime::{LockClient, LockError, current_lock, distributed_lock};

struct Item {
    r#ref: u32,
}

#[distributed_lock(key = "x:<type>:<item.ref>:<r#match>", client = locks)]
async fn raw(locks: &LockClient, r#type: &str, item: &Item, r#match: u8) -> Result<String, LockError> {
    let _ = (r#type, item, r#match);
    Ok(current_lock().unwrap().key().to_owned())
}

/// The key from the caller, the arguments from the macro.
macro_rules! job_with_key {
    ($name:ident, $key:literal) => {
        #[distributed_lock(key = $key, client = locks)]
        async fn $name(locks: &LockClient, id: u64) -> Result<String, LockError> {
            let _ = id;
            Ok(current_lock().unwrap().key().to_owned())
        }
    };
}

/// The key from the macro, an argument from the caller.
macro_rules! job_with_arg {
    ($name:ident, $arg:ident) => {
        #[distributed_lock(key = "job:b:<id>", client = locks)]
        async fn $name(locks: &LockClient, $arg: u64) -> Result<String, LockError> {
            let _ = $arg;
            Ok(current_lock().unwrap().key().to_owned())
        }
    };
}

/// Both from the macro, for a method.
macro_rules! service {
    ($name:ident) => {
        struct $name {
            locks: LockClient,
            tenant: &'static str,
        }

        impl $name {
            #[distributed_lock(key = "svc:<self.tenant>:<id>", client = self.locks)]
            async fn run(&self, id: u64) -> Result<String, LockError> {
                let _ = id;
                Ok(current_lock().unwrap().key().to_owned())
            }
        }
    };
}

job_with_key!(job_a, "job:a:<id>");
job_with_arg!(job_b, id);
service!(Service);

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let locks = LockClient::in_memory();
    let item = Item { r#ref: 7 };
    assert_eq!(raw(&locks, "t", &item, 9).await.unwrap(), "x:t:7:9");
    assert_eq!(job_a(&locks, 1).await.unwrap(), "job:a:1");
    assert_eq!(job_b(&locks, 2).await.unwrap(), "job:b:2");
    let service = Service { locks, tenant: "acme" };
    assert_eq!(service.run(3).await.unwrap(), "svc:acme:3");
}
