//! The operator's verbs on one Redis server: reading and ending
//! everything kept under a name. (Every other verb is its primitive's:
//! see [`primitive`](crate::primitive).)

mod force;
mod inspect;
