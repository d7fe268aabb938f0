//! Egress encapsulation: write one copy of a frame for one port.

use crate::l2::Verdict;
use tables::Encap;

/// Ethernet minimum without FCS; frames that shrink below it when a tag is
/// removed are padded back, as on a wire.
const MIN_FRAME: usize = 60;

/// Write `frame` as it must leave a port with encapsulation `encap` into
/// `out` (at least `frame.len() + 4` bytes). Returns the length written.
#[inline]
pub fn write(frame: &[u8], v: &Verdict, encap: Encap, out: &mut [u8]) -> usize {
    let inner = &frame[v.inner_off as usize..];
    out[..12].copy_from_slice(&frame[..12]);
    let mut len = 12;
    if let Encap::Tagged { tpid, vid } = encap {
        let tci = (v.pcp as u16) << 13 | (vid & 0xfff);
        out[12..14].copy_from_slice(&tpid.to_be_bytes());
        out[14..16].copy_from_slice(&tci.to_be_bytes());
        len = 16;
    }
    out[len..len + inner.len()].copy_from_slice(inner);
    len += inner.len();
    if len < MIN_FRAME && len < frame.len() {
        out[len..MIN_FRAME].fill(0);
        len = MIN_FRAME;
    }
    len
}
