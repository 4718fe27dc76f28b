//! `lsm-confine`: the OS-sandbox helper as a program of its own, for hosts of the sandbox
//! that do not dispatch it from their own `main` (and for this crate's tests).

fn main() {
    lsm_sandbox::confine::helper_main()
}
