// The panel's shell: session check, navigation, team switcher, and the page for the path.
import { render } from 'preact';
import { useEffect } from 'preact/hooks';
import { api, sessionEnded } from './api';
import { currentPath, match, navigate } from './router';
import { chooseTeam, loadSession, ready, signedOut, team, user } from './state';
import { Busy } from './ui';
import { SignInPage, SignInLinkPage } from './pages/sign-in';
import { AppsPage, AppPage } from './pages/apps';
import { ApplyPage } from './pages/apply';
import { AccountPage } from './pages/account';
import { TeamPage, NotificationsPage } from './pages/team';
import { DatabasesPage, DatabasePage } from './pages/databases';
import { StoragePage, StorageDetailPage } from './pages/storage';
import { ToolsPage } from './pages/tools';
import { AuditLogPage } from './pages/audit-log';
import './styles.css';

const NAV: Array<[string, string]> = [
  ['/apps', 'Applications'],
  ['/apply', 'Apply'],
  ['/databases', 'Databases'],
  ['/storage', 'Object storage'],
  ['/tools', 'Tools'],
  ['/team', 'Team'],
  ['/notifications', 'Notifications'],
  ['/audit-log', 'Audit log'],
  ['/account', 'Account'],
];

function Page({ path }: { path: string }) {
  let p: Record<string, string> | null;
  if ((p = match('/apps/:id', path))) return <AppPage id={Number(p.id)} />;
  if ((p = match('/databases/:uuid', path))) return <DatabasePage uuid={p.uuid!} />;
  if ((p = match('/storage/:name', path))) return <StorageDetailPage name={p.name!} />;
  if (path.startsWith('/apply')) return <ApplyPage />;
  if (path.startsWith('/databases')) return <DatabasesPage />;
  if (path.startsWith('/storage')) return <StoragePage />;
  if (path.startsWith('/tools')) return <ToolsPage />;
  if (path.startsWith('/team')) return <TeamPage />;
  if (path.startsWith('/notifications')) return <NotificationsPage />;
  if (path.startsWith('/audit-log')) return <AuditLogPage />;
  if (path.startsWith('/account')) return <AccountPage />;
  return <AppsPage />;
}

function Shell() {
  const path = currentPath.value;
  const me = user.value;
  const current = team.value;
  useEffect(() => {
    if (path === '/') navigate('/apps', true);
  }, [path]);
  if (!me) return null;
  return (
    <>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="top">
        <a class="brand" href="/apps">
          Berth
        </a>
        <label class="team-switch">
          <span class="visually-hidden">Team</span>
          <select
            aria-label="Team"
            value={current?.id ?? ''}
            onChange={(e) => chooseTeam(Number(e.currentTarget.value))}
          >
            {me.teams.map((t) => (
              <option key={t.id} value={t.id}>
                {t.name} ({t.role})
              </option>
            ))}
          </select>
        </label>
        <span class="who">{me.email}</span>
        <button
          type="button"
          class="secondary small"
          onClick={() => {
            void api.post('/api/v1/auth/sign-out').finally(() => {
              signedOut();
              navigate('/sign-in');
            });
          }}
        >
          Sign out
        </button>
      </header>
      <nav class="side" aria-label="Main">
        <ul>
          {NAV.map(([href, label]) => (
            <li key={href}>
              <a href={href} aria-current={path.startsWith(href) ? 'page' : undefined}>
                {label}
              </a>
            </li>
          ))}
        </ul>
      </nav>
      <main id="main" tabIndex={-1}>
        <Page path={path} />
      </main>
    </>
  );
}

function App() {
  const path = currentPath.value;
  if (!ready.value) return <Busy label="Loading Berth…" />;
  if (path.startsWith('/sign-in/link')) return <SignInLinkPage />;
  if (!user.value || sessionEnded.value) {
    return <SignInPage ended={sessionEnded.value && user.value !== null} />;
  }
  if (path.startsWith('/sign-in')) {
    navigate('/apps', true);
    return null;
  }
  return <Shell />;
}

void loadSession();
render(<App />, document.getElementById('app')!);
