//! Cost of `wire::offload::complete_partial`, which veth ports run on
//! every received frame: `cargo bench -p wire --bench offload`.
//!
//! - `valid/64`, `valid/1514`: a TCP frame whose checksum is already
//!   right (the common case: the check reads the headers and compares the
//!   field with the pseudo-header sum, no pass over the payload);
//! - `partial/64`, `partial/1514`: the field holds the pseudo-header sum
//!   (an offloading sender): one checksum pass, then the field written;
//!   the benchmark puts the partial value back before each call;
//! - `arp`: a non-IP frame (EtherType only).

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use wire::checksum::{combine, finish, fold, sum};
use wire::offload::complete_partial;

/// Ethernet + IPv4 + TCP frame of `len` bytes with a correct checksum;
/// also the field value an offloading sender would have left.
fn tcp_frame(len: usize) -> (Vec<u8>, [u8; 2]) {
    let mut f = vec![0u8; len];
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let l4len = len - 34;
    f[14] = 0x45;
    f[16..18].copy_from_slice(&((20 + l4len) as u16).to_be_bytes());
    f[22] = 64;
    f[23] = 6;
    f[26..30].copy_from_slice(&[10, 0, 0, 1]);
    f[30..34].copy_from_slice(&[10, 0, 0, 2]);
    f[46] = 0x50;
    for (i, b) in f[54..].iter_mut().enumerate() {
        *b = (i * 31) as u8;
    }
    let pseudo = combine(sum(&f[26..34]), 6 + l4len as u32);
    let c = finish(combine(pseudo, sum(&f[34..])));
    f[50..52].copy_from_slice(&c.to_be_bytes());
    (f, fold(pseudo).to_be_bytes())
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("complete_partial");
    for len in [64usize, 1514] {
        let (mut f, _) = tcp_frame(len);
        g.bench_function(format!("valid/{len}"), |b| {
            b.iter(|| complete_partial(black_box(&mut f)))
        });
        let (mut f, partial) = tcp_frame(len);
        g.bench_function(format!("partial/{len}"), |b| {
            b.iter(|| {
                f[50..52].copy_from_slice(&partial);
                complete_partial(black_box(&mut f))
            })
        });
    }
    let mut arp = vec![0u8; 60];
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    g.bench_function("arp", |b| b.iter(|| complete_partial(black_box(&mut arp))));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
