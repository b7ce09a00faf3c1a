//! Several committers at once: every acknowledged entry is claimed once, and each thread's
//! dependent entries replay in the order the thread wrote them.

use std::collections::HashMap;

use crate::{new_log, reopen, replay_all};

#[test]
fn concurrent_committers_lose_nothing_and_keep_each_threads_order() {
    let log = new_log(8192, 64, 4);
    let threads = 6u8;
    let per_thread = 150u32;
    std::thread::scope(|s| {
        for t in 0..threads {
            let log = &log;
            s.spawn(move || {
                for i in 0..per_thread {
                    let mut b = vec![t + 1; 40];
                    b[..4].copy_from_slice(&i.to_le_bytes());
                    log.append(1, 1, &b, i % 3 != 1).unwrap();
                }
            });
        }
    });
    let (mut log, claim) = reopen(log.into_region(), 0);
    assert_eq!(claim.missing, None);
    let (applied, result) = replay_all(&mut log, &claim);
    result.unwrap();
    assert_eq!(applied.len(), usize::from(threads) * per_thread as usize);
    let mut next: HashMap<u8, u32> = HashMap::new();
    for (_, b) in &applied {
        let i = u32::from_le_bytes(b[..4].try_into().unwrap());
        let expected = next.entry(b[4]).or_default();
        assert_eq!(i, *expected, "thread {} out of order", b[4] - 1);
        *expected += 1;
    }
}
