import concurrent.futures as cf
def fetch_all():
    futs = [cf.Future() for _ in range(3)]
    return [f.result() for f in futs]
fetch_all()
