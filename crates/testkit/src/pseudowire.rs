//! Pseudowire test helpers: the zebra module's side channel as a client,
//! `show mpls pseudowires` rows, and waiting for the first frame through.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::frame::{mac, test_frame, test_info, Tag};
use crate::rawport::RawPort;
use crate::Switch;

/// Sends one line to the side channel (`routing.pseudowire-socket`) as the
/// zebra module does and returns the answer; the connect error if the
/// socket does not take connections.
pub fn side_channel(path: &std::path::Path, line: &str) -> Result<String, String> {
    use std::os::unix::ffi::OsStrExt;
    // SAFETY: plain socket calls on a descriptor closed before returning;
    // `sa` and `buf` outlive the calls that use them.
    unsafe {
        let fd = libc::socket(libc::AF_UNIX, libc::SOCK_SEQPACKET, 0);
        if fd < 0 {
            return Err(format!("socket: {}", std::io::Error::last_os_error()));
        }
        let mut sa: libc::sockaddr_un = std::mem::zeroed();
        sa.sun_family = libc::AF_UNIX as libc::sa_family_t;
        for (d, s) in sa.sun_path.iter_mut().zip(path.as_os_str().as_bytes()) {
            *d = *s as libc::c_char;
        }
        let r = libc::connect(
            fd,
            (&sa as *const libc::sockaddr_un).cast(),
            std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t,
        );
        if r != 0 {
            let e = std::io::Error::last_os_error();
            libc::close(fd);
            return Err(format!("connect {path:?}: {e}"));
        }
        let sent = libc::send(fd, line.as_ptr().cast(), line.len(), 0);
        let mut buf = [0u8; 512];
        let n = if sent > 0 {
            libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), 0)
        } else {
            0
        };
        libc::close(fd);
        Ok(String::from_utf8_lossy(&buf[..n.max(0) as usize]).into_owned())
    }
}

/// `show mpls pseudowires --json`.
pub fn pseudowires(sw: &Switch) -> Value {
    sw.show_json(&["show", "mpls", "pseudowires"])
}

/// The row of pseudowire `name` in [`pseudowires`]' answer.
pub fn row<'a>(v: &'a Value, name: &str) -> Option<&'a Value> {
    v["pseudowires"]
        .as_array()?
        .iter()
        .find(|p| p["name"] == name)
}

/// Sends `len`-byte probes (phase 9) from `from` until one arrives at `to`:
/// the PEs resolve each other's MAC on the first frames. Panics after 10 s
/// with `what()` (the caller's diagnostics).
pub fn wait_through(
    from: &RawPort,
    to: &RawPort,
    tags: &[Tag],
    len: usize,
    what: impl Fn() -> String,
) {
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        from.send(&test_frame(&mac(1), &mac(2), tags, 9, 0, len))
            .expect("send a probe");
        if to
            .recv_test_frames(Duration::from_millis(200))
            .expect("receive")
            .iter()
            .any(|f| test_info(f).is_some_and(|i| i.phase == 9))
        {
            return;
        }
        assert!(Instant::now() < end, "no frame through: {}", what());
    }
}
