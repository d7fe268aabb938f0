//! Checks of `copp` that need the whole configuration.

pub(crate) fn check(cfg: &crate::Config) -> Vec<crate::error::Issue> {
    let mut out = Vec::new();
    for (class, r) in cfg.control_plane_policing.classes() {
        let Some(r) = r else { continue };
        let p = format!("control-plane-policing.{}", class.name());
        if !(1..=10_000_000).contains(&r.rate) {
            out.push(crate::error::Issue {
                path: format!("{p}.rate"),
                message: format!("{} is out of range 1..10000000 packets/s", r.rate),
            });
        }
        if r.burst == Some(0) {
            out.push(crate::error::Issue {
                path: format!("{p}.burst"),
                message: "must be at least 1".into(),
            });
        }
    }
    out
}
