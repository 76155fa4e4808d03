"""The operator API: every console command through one IAM-guarded function in the VPC.

- `requests`: the request models (what a caller may ask);
- `commands`: one plain function per console command over a `Backend` (the CLI's direct path
  and the function call the same ones): `reads` those that read, `changes` those that change
  something, `backend` what they run against;
- `service`: validate, authorize by the function's access, run, reply;
- `client`: the CLI's (and the web console's) way in, SigV4-signed to the function URL;
- `runtime`: the function's settings and backend, built once per cold start.
"""
