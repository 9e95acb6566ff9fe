//! One module per service, each owning its command-line arguments and what they run:
//! `gpusvc <service> <command>`. Adding a service adds a module here and a variant to `main`'s
//! `Command`.

pub(crate) mod bo_cache;
pub(crate) mod program_cache;
pub(crate) mod vcache;
