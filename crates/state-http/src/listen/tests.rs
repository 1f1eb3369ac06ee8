use super::*;

fn busy(slot: &Slot) {
    slot.busy.fetch_add(1, Ordering::Relaxed);
}

#[test]
fn at_the_cap_the_connection_idle_longest_makes_room() {
    let table = Table::new(3);
    let slots: Vec<Arc<Slot>> = (0..3).map(|_| table.admit().unwrap()).collect();
    // The first has a request in flight; the second was active after the third.
    busy(&slots[0]);
    slots[1].last_active.store(50, Ordering::Relaxed);
    slots[2].last_active.store(10, Ordering::Relaxed);
    let fourth = table.admit().expect("an idle connection makes room");
    assert!(slots[2].closing.is_cancelled(), "the one idle longest is closed");
    assert!(!slots[0].closing.is_cancelled() && !slots[1].closing.is_cancelled());
    // Closed ones no longer count, even before their tasks release them.
    busy(&slots[1]);
    busy(&fourth);
    assert!(table.admit().is_none(), "every live connection is busy: the newcomer is shed");
    table.release(&slots[2]);
    assert!(table.admit().is_none(), "releasing a closed slot frees nothing more");
    slots[1].busy.fetch_sub(1, Ordering::Relaxed);
    assert!(table.admit().is_some());
    assert!(slots[1].closing.is_cancelled());
}

#[test]
fn a_request_in_flight_keeps_its_connection_counted_busy_until_its_body_ends() {
    let table = Table::new(1);
    let slot = table.admit().unwrap();
    let in_flight = InFlight::begin(&slot);
    assert_eq!(slot.busy.load(Ordering::Relaxed), 1);
    assert!(table.admit().is_none());
    drop(in_flight);
    assert_eq!((slot.busy.load(Ordering::Relaxed), slot.served.load(Ordering::Relaxed)), (0, 1));
    assert!(table.admit().is_some());
}
