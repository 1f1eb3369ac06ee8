//! Both kinds of hold against real processes: each signals the process it was opened on, sees
//! it exit, and refuses one whose start time is not the recorded one.

use std::process::{Child, Command};
use std::time::Duration;

use super::*;

fn sleeper() -> Child {
    Command::new("sleep").arg("30").spawn().expect("spawn sleep")
}

fn started_of(child: &Child) -> u64 {
    process::started(child.id()).expect("a live child has a start time")
}

fn ends_a_process_it_holds<H: Hold>() {
    let mut child = sleeper();
    let hold = H::open(child.id(), started_of(&child)).expect("open").expect("the child is running");
    assert!(!hold.exited_within(Duration::from_millis(50)), "sleep is still sleeping");
    hold.signal(Signal::Terminate).expect("signal");
    assert!(hold.exited_within(Duration::from_secs(10)), "SIGTERM ends sleep");
    // The child is a zombie until reaped, and a signal to it is no error.
    hold.signal(Signal::Kill).expect("a signal after the exit is not an error");
    child.wait().expect("reap");
}

fn refuses_a_process_that_started_at_another_time<H: Hold>() {
    let mut child = sleeper();
    let other_start = started_of(&child) + 1;
    assert!(H::open(child.id(), other_start).expect("open").is_none(), "a different start time is another process");
    child.kill().expect("kill");
    child.wait().expect("reap");
}

fn a_gone_process_is_not_held<H: Hold>() {
    let mut child = Command::new("true").spawn().expect("spawn true");
    let pid = child.id();
    let started = process::started(pid);
    child.wait().expect("reap");
    if let Some(started) = started {
        assert!(H::open(pid, started).expect("open").is_none());
    }
}

#[test]
fn by_start_time_ends_a_process_it_holds() {
    ends_a_process_it_holds::<ByStartTime>();
}

#[test]
fn by_start_time_refuses_a_process_that_started_at_another_time() {
    refuses_a_process_that_started_at_another_time::<ByStartTime>();
}

#[test]
fn by_start_time_does_not_hold_a_gone_process() {
    a_gone_process_is_not_held::<ByStartTime>();
}

#[test]
fn by_start_time_stops_signalling_once_the_start_time_changes() {
    // As if the pid had been reused: the hold's recorded start time no longer matches, so a
    // signal goes nowhere and the process (not the one held) lives on.
    let mut child = sleeper();
    let stale = ByStartTime { pid: child.id(), started: started_of(&child) + 1 };
    stale.signal(Signal::Kill).expect("no error");
    std::thread::sleep(Duration::from_millis(100));
    assert!(child.try_wait().expect("try_wait").is_none(), "a process with another start time was signalled");
    assert!(stale.exited_within(Duration::ZERO), "the held process (by its start time) is gone");
    child.kill().expect("kill");
    child.wait().expect("reap");
}

#[test]
fn the_native_hold_ends_a_process_it_holds() {
    ends_a_process_it_holds::<Native>();
}

#[test]
fn the_native_hold_refuses_a_process_that_started_at_another_time() {
    refuses_a_process_that_started_at_another_time::<Native>();
}

#[test]
fn the_native_hold_does_not_hold_a_gone_process() {
    a_gone_process_is_not_held::<Native>();
}
