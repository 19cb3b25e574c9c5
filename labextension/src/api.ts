/**
 * Requests to the dnnbench server extension (dnnbench/face/labext.py, docs/jupyterlab.md).
 *
 * The server writes the notebooks (from the templates shipped in the Python package) through the
 * Jupyter contents manager and answers with their paths; the front end only opens them.
 */
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

/** A notebook shipped in dnnbench.notebooks that can be opened from JupyterLab. */
export interface IPackagedNotebook {
  /** File stem, e.g. "mnist_study". */
  name: string;
  /** Title from the notebook's first heading. */
  title: string;
}

/** What the server created or found. */
export interface IOpened {
  /** Path of the notebook relative to the server root. */
  path: string;
  /** True when the notebook already existed (never overwritten). */
  existed: boolean;
  /** For spec files: "network", "cluster" or "state". */
  kind?: string;
}

async function request<T>(endpoint: string, init: RequestInit = {}): Promise<T> {
  const settings = ServerConnection.makeSettings();
  const url = URLExt.join(settings.baseUrl, 'dnnbench', endpoint);
  const response = await ServerConnection.makeRequest(url, init, settings);
  let data: any = null;
  try {
    data = await response.json();
  } catch {
    data = null;
  }
  if (!response.ok) {
    const message = (data && data.message) || response.statusText;
    throw new Error(message);
  }
  return data as T;
}

function post<T>(endpoint: string, body: Record<string, string>): Promise<T> {
  return request<T>(endpoint, { method: 'POST', body: JSON.stringify(body) });
}

/** The packaged notebooks other than the workbench (studies, validation). */
export async function listNotebooks(): Promise<IPackagedNotebook[]> {
  const data = await request<{ notebooks: IPackagedNotebook[] }>('notebooks');
  return data.notebooks;
}

/** A new workbench notebook (from the template) in folder `dir`. */
export function newWorkbench(dir: string): Promise<IOpened> {
  return post<IOpened>('workbench', { dir });
}

/** A copy of a packaged notebook in folder `dir` (an existing copy is kept as it is). */
export function copyNotebook(name: string, dir: string): Promise<IOpened> {
  return post<IOpened>('notebook', { name, dir });
}

/** The workbench notebook for a spec file, next to it (created once, then reused). */
export function specWorkbench(path: string): Promise<IOpened> {
  return post<IOpened>('spec', { path });
}

/** What the server was started to show: the notebook `dnnbench lab` opened, to run once (else null). */
export async function startup(): Promise<string | null> {
  const data = await request<{ run: string | null }>('startup');
  return data.run;
}
