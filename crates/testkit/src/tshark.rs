//! tshark's reading of a frame: the independent decoder tests check
//! Lanyard's output bytes against (Debian `tshark`).

use std::io::{self, Write as _};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// Whether tshark is installed.
pub fn available() -> bool {
    Command::new("tshark").arg("-v").output().is_ok()
}

/// tshark's view of one Ethernet frame: each of `fields`' values
/// (several occurrences comma-joined), IPv4 checksums checked; `decode_as`
/// are `-d` "decode as" rules (tshark(1)).
pub fn fields(frame: &[u8], fields: &[&str], decode_as: &[&str]) -> io::Result<Vec<String>> {
    static N: AtomicU32 = AtomicU32::new(0);
    let path = std::env::temp_dir().join(format!(
        "lanyard-tshark-{}-{}.pcap",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    // pcap global header (LINKTYPE_ETHERNET), then one record.
    let mut pcap = vec![0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0];
    pcap.extend_from_slice(&[0; 8]);
    pcap.extend_from_slice(&65535u32.to_le_bytes());
    pcap.extend_from_slice(&1u32.to_le_bytes());
    pcap.extend_from_slice(&[0; 8]);
    pcap.extend_from_slice(&(frame.len() as u32).to_le_bytes());
    pcap.extend_from_slice(&(frame.len() as u32).to_le_bytes());
    pcap.extend_from_slice(frame);
    std::fs::File::create(&path)?.write_all(&pcap)?;
    let mut c = Command::new("tshark");
    c.arg("-r").arg(&path).args([
        "-o",
        "ip.check_checksum:TRUE",
        "-T",
        "fields",
        "-E",
        "separator=|",
        "-E",
        "occurrence=a",
        "-E",
        "aggregator=,",
    ]);
    for d in decode_as {
        c.args(["-d", d]);
    }
    for f in fields {
        c.args(["-e", f]);
    }
    let out = c.output();
    let _ = std::fs::remove_file(&path);
    let out = out?;
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "tshark: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .trim_end()
        .split('|')
        .map(str::to_string)
        .collect())
}
