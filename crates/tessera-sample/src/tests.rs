use super::*;

fn sampler(params: SamplingParams) -> Sampler {
    Sampler::new(params).unwrap()
}

#[test]
fn greedy_picks_the_largest_finite_logit() {
    let mut s = sampler(SamplingParams::default());
    let mut logits = [0.5, f32::NEG_INFINITY, 2.0, 1.0];
    assert_eq!(s.sample(&mut logits, &[]), Ok(2));
}

#[test]
fn all_masked_is_an_error_not_a_draw() {
    let mut greedy = sampler(SamplingParams::default());
    let mut logits = [f32::NEG_INFINITY; 4];
    assert_eq!(greedy.sample(&mut logits, &[]), Err(SamplingError::NothingToSample));
    let mut hot = sampler(SamplingParams {
        temperature: 1.0,
        ..Default::default()
    });
    assert_eq!(hot.sample(&mut logits, &[]), Err(SamplingError::NothingToSample));
}

#[test]
fn masked_tokens_are_never_drawn() {
    let mut s = sampler(SamplingParams {
        temperature: 5.0,
        seed: 7,
        ..Default::default()
    });
    for _ in 0..2000 {
        let mut logits = [1.0, f32::NEG_INFINITY, 1.0, f32::NEG_INFINITY];
        let token = s.sample(&mut logits, &[]).unwrap();
        assert!(token == 0 || token == 2, "drew masked token {token}");
    }
}

#[test]
fn same_seed_same_tokens() {
    let draw = |seed| {
        let mut s = sampler(SamplingParams {
            temperature: 1.0,
            seed,
            ..Default::default()
        });
        (0..50)
            .map(|_| s.sample(&mut [0.0, 0.1, 0.2, 0.3, 0.4], &[]).unwrap())
            .collect::<Vec<_>>()
    };
    assert_eq!(draw(3), draw(3));
    assert_ne!(draw(3), draw(4));
}

#[test]
fn top_k_one_is_greedy_and_top_k_limits_support() {
    let mut s = sampler(SamplingParams {
        temperature: 2.0,
        top_k: 2,
        seed: 1,
        ..Default::default()
    });
    for _ in 0..500 {
        let token = s.sample(&mut [3.0, 0.0, 2.9, 1.0], &[]).unwrap();
        assert!(token == 0 || token == 2);
    }
}

#[test]
fn top_p_keeps_the_smallest_sufficient_prefix() {
    // probabilities ≈ [0.64, 0.24, 0.09, 0.03]: top_p 0.6 keeps only token 0
    let mut s = sampler(SamplingParams {
        temperature: 1.0,
        top_p: 0.6,
        seed: 5,
        ..Default::default()
    });
    for _ in 0..200 {
        assert_eq!(s.sample(&mut [3.0, 2.0, 1.0, 0.0], &[]).unwrap(), 0);
    }
}

#[test]
fn min_p_drops_unlikely_tokens() {
    // p(1)/p(0) = e^-1 ≈ 0.37 survives min_p 0.3; p(2)/p(0) = e^-4 does not
    let mut s = sampler(SamplingParams {
        temperature: 1.0,
        min_p: 0.3,
        seed: 9,
        ..Default::default()
    });
    let mut seen = [false; 3];
    for _ in 0..2000 {
        seen[s.sample(&mut [4.0, 3.0, 0.0], &[]).unwrap() as usize] = true;
    }
    assert_eq!(seen, [true, true, false]);
}

#[test]
fn repetition_penalty_shrinks_seen_tokens_once() {
    let mut logits = [2.0, -2.0, 2.0];
    apply_repetition_penalty(&mut logits, &[0, 0, 1], 2.0);
    assert_eq!(logits, [1.0, -4.0, 2.0]);
}

#[test]
fn invalid_parameters_name_the_field() {
    let cases = [
        (
            SamplingParams {
                temperature: -1.0,
                ..Default::default()
            },
            "temperature",
        ),
        (
            SamplingParams {
                temperature: f32::NAN,
                ..Default::default()
            },
            "temperature",
        ),
        (
            SamplingParams {
                top_p: 0.0,
                ..Default::default()
            },
            "top_p",
        ),
        (
            SamplingParams {
                min_p: 1.5,
                ..Default::default()
            },
            "min_p",
        ),
        (
            SamplingParams {
                repetition_penalty: 0.0,
                ..Default::default()
            },
            "repetition_penalty",
        ),
    ];
    for (params, field) in cases {
        match Sampler::new(params) {
            Err(SamplingError::InvalidParameter { field: got, .. }) => assert_eq!(got, field),
            other => panic!("expected an error for {field}, got {other:?}"),
        }
    }
}

#[test]
fn a_mask_applies_before_everything_and_empty_is_an_error() {
    let mut hot = sampler(SamplingParams {
        temperature: 2.0,
        top_k: 2,
        seed: 3,
        ..Default::default()
    });
    // Top-k = 2 would keep tokens 0 and 1; the mask leaves only 2 and 3.
    for _ in 0..500 {
        let mut logits = [9.0, 8.0, 1.0, 0.5];
        let token = hot.sample_allowed(&mut logits, &[], |t| t >= 2).unwrap();
        assert!(token >= 2, "drew masked token {token}");
    }
    let mut logits = [1.0, 2.0];
    assert_eq!(
        hot.sample_allowed(&mut logits, &[], |_| false),
        Err(SamplingError::EmptyMask)
    );
}
