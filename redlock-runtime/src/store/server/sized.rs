//! Commands built at their final size: a speed trick for the commands of
//! every plain lock pair (`SET NX`, the conditional delete and the
//! signal's `EXISTS`/`DEL`).
//!
//! `redis::cmd(name).arg(..)` starts with empty buffers and grows them
//! per argument: three or four allocations a command where two do.
//! [`sized`] reserves both buffers once, from the arguments' lengths.
//! What it sends is the same bytes.
//!
//! Measured: three allocations fewer per plain pair on Valkey (the
//! conditional delete and `EXISTS`; `SET NX` was sized already). Its gain
//! alone is within lockbench's run-to-run scatter: in three alternated
//! runs, our client's CPU per pair over raw_conditional's went from
//! 1.20–1.30 to 1.10–1.21 (`--server valkey --only uncontended
//! --uncontended-impls raw,ours,raw_conditional`); see `design`, "What a
//! pair carries", for the change that moved the figure.

use redis::Cmd;

/// Room for one number argument (`u64::MAX` has 20 digits).
const NUMBER: usize = 20;

/// The command of `words`, with room for `numbers` number arguments still
/// to be added with `arg`.
pub(crate) fn sized(words: &[&str], numbers: usize) -> Cmd {
    let data = words.iter().map(|w| w.len()).sum::<usize>() + NUMBER * numbers;
    let mut cmd = Cmd::with_capacity(words.len() + numbers, data);
    for word in words {
        cmd.arg(*word);
    }
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sized_command_packs_as_the_grown_one() {
        let mut grown = redis::cmd("SET");
        grown
            .arg("lock:{a}")
            .arg("token")
            .arg("NX")
            .arg("PX")
            .arg(30_000u64);
        let mut cmd = sized(&["SET", "lock:{a}", "token", "NX", "PX"], 1);
        cmd.arg(30_000u64);
        assert_eq!(cmd.get_packed_command(), grown.get_packed_command());
    }
}
