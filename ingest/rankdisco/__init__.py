"""RankDisco's domain tables: a tenant's domains with their onboarding state and
what onboarding found about them (backlinks, ranked keywords, referring domains, brand
properties), the writes the `domain-onboard` workflow makes (`services`) and the reads the
dashboard shows (`selectors`). Re-onboarding a domain upserts every row: unique constraints
per domain and bulk upserts, never a duplicate."""
